"""The Trainer's pushes at each save (`--hub_strategy every_save`): every pushed model loads with trust_remote_code,
in a process without fiberbench, and answers as the checkpoint it was pushed from."""

import json
import sys

import pytest

from ..training.conftest import run_train

REPO_ID = "fiber-org/fiber-t5-every-save"

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
def test_every_pushed_model_loads_without_fiberbench_and_answers_as_its_checkpoint(hub_server, run_client, tmp_path):
    from test_model_round_trip import sample_blanks  # tests/hub is on sys.path (see conftest.py)

    output_dir = tmp_path / "run"
    saved = ["--max_steps", 8, "--save_strategy", "steps", "--save_steps", 4, "--save_total_limit", 2, "--do_eval",
             "false", "--do_predict", "false", "--hub_always_push", "true"]
    run_train([*saved, "--push_to_hub", "--hub_model_id", REPO_ID, "--hub_strategy", "every_save", "--output_dir",
               output_dir], offline=False)
    pushed = hub_server.history(REPO_ID)[1:]
    assert [commit.title for commit in pushed] == [f"Training in progress, step {step}" for step in (4, 8)] + [
        "End of training"]
    sources = [f"{REPO_ID}@{pushed[0].oid}", str(output_dir / "checkpoint-4"), f"{REPO_ID}@{pushed[-1].oid}",
               str(output_dir / "model")]
    result = run_client([sys.executable, "-c", FILL, json.dumps(sample_blanks()), *sources], cwd=tmp_path)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["imported_fiberbench"]
    assert report[sources[0]] == report[sources[1]] and report[sources[2]] == report[sources[3]]
