"""`accelerate launch training/train.py --push_to_hub`, then the Hub copy answers like the local model."""

import json
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, hf_hub_download

import fiberbench.training
from fiberbench.data import SAMPLE_DIR
from fiberbench.records import feature_file_name

REPO_ID = "fiber-org/fiber-t5-sample"
# Imported by name from tests/hub/test_trainer_push.py too (tests/hub is on sys.path): no relative imports here.
TRAIN_SCRIPT = Path(fiberbench.training.__file__).parent / "train.py"
ACCELERATE_CONFIG = TRAIN_SCRIPT.parent / "accelerate.yaml"
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ACCELERATE_CONFIG), "--cpu"]
# The sample demo (the default with no model and no dataset), cut to a few steps: the test is the push.
FAST_TRAINING = ["--max_steps", "4", "--do_eval", "false", "--per_device_eval_batch_size", "64"]
NUM_EXAMPLES = 4

# Runs in a fresh process that never imports fiberbench: the model's code comes from the folder
# or the repo (trust_remote_code). Prints each source's greedy/beam answers to the same blanks.
ANSWER = """
import json
import sys

import numpy as np
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

sources, examples = sys.argv[1:3], json.loads(sys.argv[3])
report = {}
for source in sources:
    model = AutoModelForSeq2SeqLM.from_pretrained(source, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=True)
    answers = []
    for example in examples:
        inputs = tokenizer(example["masked_caption"].replace("_____", "<extra_id_0>"), return_tensors="pt")
        video_features = torch.from_numpy(np.load(example["features"])).float()
        with torch.no_grad():
            output = model.generate(
                **inputs,
                video_features=video_features,
                video_attention_mask=torch.ones(video_features.shape[:2], dtype=torch.long),
            )
        answers.append(tokenizer.decode(output[0]))
    report[source] = {"answers": answers, "model_module": type(model).__module__}
report["imported_fiberbench"] = any(name.startswith("fiberbench") for name in sys.modules)
print(json.dumps(report))
"""


def sample_blanks() -> list[dict]:
    """The first test blanks of the bundled sample, with the path of each clip's I3D features."""
    records = json.loads((SAMPLE_DIR / "test.json").read_text(encoding="utf-8"))[:NUM_EXAMPLES]
    return [
        {
            "masked_caption": record["masked_caption"],
            "features": str(
                SAMPLE_DIR / "i3d" / feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])
            ),
        }
        for record in records
    ]


@pytest.mark.slow
def test_train_push_and_load_model(hub_server, run_client, tmp_path):
    output_dir = tmp_path / "run"
    run_client(
        [*LAUNCH, TRAIN_SCRIPT, *FAST_TRAINING, "--output_dir", output_dir]
        + ["--push_to_hub", "--hub_model_id", REPO_ID],
        cwd=tmp_path,
    )
    local_model = output_dir / "model"

    result = run_client([sys.executable, "-c", ANSWER, local_model, REPO_ID, json.dumps(sample_blanks())], cwd=tmp_path)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["imported_fiberbench"]
    local, pulled = report[str(local_model)], report[REPO_ID]
    assert pulled["model_module"].startswith("transformers_modules")
    assert pulled["answers"] == local["answers"]
    assert len(pulled["answers"]) == NUM_EXAMPLES

    card_path = hf_hub_download(REPO_ID, "README.md")
    assert Path(card_path).read_text(encoding="utf-8") == (local_model / "README.md").read_text(encoding="utf-8")
    card_scores = {result.metric_type: result.metric_value for result in ModelCard.load(card_path).data.eval_results}
    test_results = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))["test"]
    assert {"exact_match", "f1"} <= set(card_scores)
    for name, value in card_scores.items():
        assert value == pytest.approx(test_results[name]), name
