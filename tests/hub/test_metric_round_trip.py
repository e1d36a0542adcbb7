"""`fiberbench push-metric` pushes the metric folder as a Space, then `evaluate.load` of the Hub copy scores like the local folder."""

import json
import shutil
import sys

import pytest

from fiberbench.cli import main
from fiberbench.metric import METRIC_PATH

REPO_ID = "fiber-org/fiber_metric"

INPUTS = {
    "predictions": ["a dog", "The Red Ball!", "two men", "", "a guitar"],
    "references": [["dog", "puppy"], ["red ball", "ball"], ["a man", "people"], [""], ["violin", "the cello"]],
    "per_example": True,
    "categories": ["animal", "object", "person", "object", "object"],
    "candidates": [["a dog", "a cat"], ["ball", "red ball"], ["two men", "a man"], [""], ["a guitar", "violin"]],
}

# Runs in a fresh process (evaluate reads HF_ENDPOINT at import): the scores of the local folder,
# of the Space loaded by its repo id, and of the Space downloaded with snapshot_download (into a
# folder named like the module, as evaluate requires: a cache snapshot is named by its commit).
SCORE = """
import json
import sys
import evaluate
from huggingface_hub import snapshot_download

local_folder, repo_id, download_dir, inputs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
sources = {
    "local folder": local_folder,
    "repo id": repo_id,
    "downloaded copy": snapshot_download(repo_id, repo_type="space", local_dir=download_dir),
}
print(json.dumps({name: evaluate.load(path).compute(**inputs) for name, path in sources.items()}))
"""


@pytest.mark.slow
def test_metric_space_scores_like_the_local_folder(hub_server, run_client, tmp_path, capsys):
    assert main(["push-metric", REPO_ID]) == 0
    assert f"{hub_server.url}/spaces/{REPO_ID}" in capsys.readouterr().out

    download_dir = tmp_path / "downloaded" / "fiber_metric"
    result = run_client([sys.executable, "-c", SCORE, METRIC_PATH, REPO_ID, download_dir, json.dumps(INPUTS)])
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    local = scores.pop("local folder")
    assert set(local) >= {"exact_match", "f1", "exact_match_per_example", "f1_by_category", "correct_at_k"}
    assert scores == {"repo id": local, "downloaded copy": local}


def test_only_the_space_s_own_files_are_uploaded(hub_server, tmp_path):
    """The reproduction: a `.env` holding a token and a scratch file beside the metric went up with it."""
    from huggingface_hub import HfApi

    from fiberbench.metric.push import SPACE_FILES, push_metric

    folder = tmp_path / "fiber_metric"
    shutil.copytree(METRIC_PATH, folder)
    (folder / ".env").write_text("HF_TOKEN=hf_secret\n")
    (folder / "scratch.bin").write_bytes(b"\0" * 1024)
    push_metric(REPO_ID, folder=folder)
    assert sorted(HfApi().list_repo_files(REPO_ID, repo_type="space")) == sorted([".gitattributes", *SPACE_FILES])
