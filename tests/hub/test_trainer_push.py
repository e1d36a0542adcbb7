"""The Trainer's pushes at each save (`--hub_strategy every_save`): every pushed model loads with trust_remote_code,
in a process without fiberbench, and answers as the checkpoint it was pushed from; the pushed card is the local one,
with the run's test scores."""

import json
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, hf_hub_download

from fiberbench.data import SAMPLE_DIR
from fiberbench.records import feature_file_name

from ..training.conftest import run_train

REPO_ID = "fiber-org/fiber-t5-every-save"
NUM_EXAMPLES = 4

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


def sample_blanks() -> list[dict]:
    """The first test blanks of the bundled sample, with the path of each clip's I3D features."""
    records = json.loads((SAMPLE_DIR / "test.json").read_text(encoding="utf-8"))[:NUM_EXAMPLES]
    return [{"masked_caption": record["masked_caption"], "features": str(SAMPLE_DIR / "i3d" / feature_file_name(
        record["video_id"], record["video_start_time"], record["video_end_time"]))} for record in records]


@pytest.mark.slow
def test_every_pushed_model_loads_without_fiberbench_and_answers_as_its_checkpoint(hub_server, run_client, tmp_path):
    output_dir = tmp_path / "run"
    saved = ["--max_steps", 8, "--save_strategy", "steps", "--save_steps", 4, "--save_total_limit", 2, "--do_eval",
             "false", "--num_beams", 1, "--only_noun_phrases", "false"]  # the test split scored, quickly: for the card
    run_train([*saved, "--push_to_hub", "--hub_model_id", REPO_ID, "--hub_strategy", "every_save", "--output_dir",
               output_dir], offline=False)
    # A save's push is skipped while the one before is still going: step 4's or step 8's may be missing.
    pushed = hub_server.history(REPO_ID)[1:]
    assert pushed[0].title in ("Training in progress, step 4", "Training in progress, step 8")
    assert pushed[-1].title == "End of training"
    first, final, saved = f"{REPO_ID}@{pushed[0].oid}", f"{REPO_ID}@{pushed[-1].oid}", output_dir / "checkpoint-{}"
    sources = [first, final, str(output_dir / "model"), str(saved).format(4), str(saved).format(8)]
    result = run_client([sys.executable, "-c", FILL, json.dumps(sample_blanks()), *sources], cwd=tmp_path)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["imported_fiberbench"] and report[final] == report[str(output_dir / "model")]
    # A push uploads its own save's model: a later save leaves `output_dir` alone while the upload runs.
    assert report[first] == report[str(saved).format(pushed[0].title.rsplit(" ", 1)[1])]
    assert len(report[final]) == NUM_EXAMPLES

    card_path = hf_hub_download(REPO_ID, "README.md")
    assert Path(card_path).read_text(encoding="utf-8") == (output_dir / "model/README.md").read_text(encoding="utf-8")
    card_scores = {result.metric_type: result.metric_value for result in ModelCard.load(card_path).data.eval_results}
    test_results = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))["test"]
    assert {"exact_match", "f1"} <= set(card_scores)
    assert all(value == pytest.approx(test_results[name]) for name, value in card_scores.items()), card_scores
