"""FiberSeq2SeqTrainer with push_to_hub and hub_strategy="checkpoint": every pushed folder is a loadable FIBER model."""

import json
import sys
from pathlib import Path

import pytest

REPO_ID = "fiber-org/fiber-t5-trainer"
# The folder of `sample_trainer.py`, shared with the Trainer path's own tests.
TRAINER_HELPERS = Path(__file__).parents[1] / "training"
# The files that make a pushed folder a FIBER model that loads with trust_remote_code.
MODEL_FILES = (
    "config.json",
    "model.safetensors",
    "configuration_fiber_t5.py",
    "modeling_fiber_t5.py",
    "processing_fiber.py",
    "processor_config.json",
    "tokenizer.json",
    "README.md",
)

# Trains two epochs of the sample demo's model with the Trainer, validating and saving after each, then pushes; run
# with tests/training (where `sample_demo_trainer` is) on its path.
TRAIN = """
import sys

import torch

output_dir, repo_id, helpers = sys.argv[1:4]
sys.path.insert(0, helpers)
from sample_trainer import sample_demo_trainer

torch.set_num_threads(1)
trainer = sample_demo_trainer(
    output_dir,
    metrics={"only_noun_phrases": False},
    trainer={"dataset_name": "fiberbench-bundled-sample", "synthetic": True},
    num_train_epochs=2,
    save_strategy="epoch",
    push_to_hub=True,
    hub_model_id=repo_id,
    hub_strategy="checkpoint",
    # Every save pushes, even while the push before is still going (the Trainer would skip it): the test counts them.
    hub_always_push=True,
)
trainer.train()
trainer.push_to_hub()
"""

# Runs in a fresh process that never imports fiberbench: each source loads through its remote code and
# processor and fills the same blanks. Sources are "FOLDER" or "REPO_ID@REVISION[/SUBFOLDER]".
FILL = """
import json
import sys

import numpy as np
from transformers import AutoModelForSeq2SeqLM, AutoProcessor

examples = json.loads(sys.argv[1])
captions = [example["masked_caption"] for example in examples]
features = [np.load(example["features"]) for example in examples]
report = {}
for source in sys.argv[2:]:
    where, options = source, {}
    if "@" in source:
        where, _, rest = source.partition("@")
        revision, _, subfolder = rest.partition("/")
        options = {"revision": revision} | ({"subfolder": subfolder} if subfolder else {})
    model = AutoModelForSeq2SeqLM.from_pretrained(where, trust_remote_code=True, **options).eval()
    processor = AutoProcessor.from_pretrained(where, trust_remote_code=True, **options)
    report[source] = model.fill_blanks(processor, captions, video_features=features, only_noun_phrases=False)
report["imported_fiberbench"] = any(name.startswith("fiberbench") for name in sys.modules)
print(json.dumps(report))
"""


@pytest.mark.slow
def test_the_trainer_pushes_a_loadable_fiber_model_and_last_checkpoint_at_each_save(hub_server, run_client, tmp_path):
    from test_model_round_trip import sample_blanks  # tests/hub is on sys.path (see conftest.py)

    output_dir = tmp_path / "trainer"
    run_client([sys.executable, "-c", TRAIN, output_dir, REPO_ID, TRAINER_HELPERS], cwd=tmp_path)

    pushed = hub_server.history(REPO_ID)[1:]
    assert [commit.title for commit in pushed] == [
        "Training in progress, epoch 1",
        "Training in progress, epoch 1, checkpoint",
        "Training in progress, epoch 2",
        "Training in progress, epoch 2, checkpoint",
        "End of training",
    ]
    for commit in pushed:
        folders = [""] + (["last-checkpoint/"] if commit.title.endswith("checkpoint") else [])
        for folder in folders:
            assert {f"{folder}{name}" for name in MODEL_FILES} <= set(commit.files), (commit.title, folder)
        card = hub_server.store.read_blob(commit.files["README.md"].sha256).decode()
        epoch = 1 if "epoch 1" in commit.title else 2
        assert f"after **{25 * epoch} optimizer steps ({epoch} epoch" in card and "validation F1 **" in card
        assert ("final model" in card) == (commit.title == "End of training")

    first, last = pushed[1].oid, pushed[-1].oid
    sources = [str(output_dir), f"{REPO_ID}@{first}", f"{REPO_ID}@{first}/last-checkpoint", f"{REPO_ID}@{last}"]
    sources.append(str(output_dir / "checkpoint-25"))
    result = run_client([sys.executable, "-c", FILL, json.dumps(sample_blanks()), *sources], cwd=tmp_path)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["imported_fiberbench"]
    assert report[f"{REPO_ID}@{last}"] == report[str(output_dir)]
    assert report[f"{REPO_ID}@{first}"] == report[f"{REPO_ID}@{first}/last-checkpoint"]
    assert report[f"{REPO_ID}@{first}"] == report[str(output_dir / "checkpoint-25")]
