"""`accelerate launch training/train.py --push_to_hub --hub_strategy ...` against the local Hub: pushes while training."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

import fiberbench.training
from fiberbench.ownership import FOLDER_RECORD

pytestmark = pytest.mark.slow

TRAIN_SCRIPT = Path(fiberbench.training.__file__).parent / "train.py"
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1"]
LAUNCH += ["--mixed_precision", "no", "--dynamo_backend", "no"]
REPO_ID = "fiber-org/fiber-t5-run"
FINAL = "FIBER model trained with fiberbench"


def train_command(args: list) -> list[str]:
    return [*LAUNCH, str(TRAIN_SCRIPT), *map(str, args), "--push_to_hub", "--hub_model_id", REPO_ID]


def train(args: list, check: bool = True) -> subprocess.CompletedProcess:
    """Run train.py to its end with this test's environment (pointed at the local Hub)."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(
        train_command(args), env=env, cwd=TRAIN_SCRIPT.parents[1], capture_output=True, text=True, timeout=600
    )
    if check and result.returncode != 0:
        pytest.fail(f"train.py exited with {result.returncode}\n{result.stderr[-8000:]}")
    return result


def commits(hub, repo_id: str = REPO_ID) -> list:
    """The repo's commits on main, oldest first."""
    repo = hub.store.repos[("model", repo_id)]
    oid, found = repo.branches["main"], []
    while oid is not None:
        found.append(repo.commits[oid])
        oid = repo.commits[oid].parent
    return found[::-1]


def text(hub, commit, path: str) -> str:
    return hub.store.read_blob(commit.files[path].sha256).decode()


def test_every_save_pushes_the_model_and_its_card_and_a_refused_commit_is_retried_by_the_next_save(
    hub_server, tmp_path
):
    output_dir = tmp_path / "run"
    # The Hub accepts the first push, refuses the second, then accepts again.
    hub_server.fail("/commit/", status=500, after=1, times=1)
    settings = ["--max_train_steps", 12, "--checkpointing_steps", 4, "--no-do_eval", "--no-do_predict"]
    result = train([*settings, "--hub_strategy", "every_save", "--output_dir", output_dir])

    failures = [line for line in result.stderr.splitlines() if "The push of" in line]
    assert len(failures) == 1 and "The push of step 8 failed; training goes on" in failures[0], failures
    pushed = commits(hub_server)
    titles = [commit.title for commit in pushed]
    # The next save's push went through; then the final model.
    assert titles == ["initial commit", "Training in progress, step 4", "Training in progress, step 12", FINAL]
    record = json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))
    for commit, step in zip(pushed[1:], (4, 12, 12)):
        # Only the model's files this run wrote (every_save pushes no checkpoint), with a card naming the step.
        assert sorted(commit.files) == sorted([".gitattributes", *record["entries"]["model"]])
        card = text(hub_server, commit, "README.md")
        assert f"after **{step} optimizer steps" in card
        assert ("final model" in card) == (commit.title == FINAL)
    final = pushed[-1]
    for name in record["entries"]["model"]:
        assert hub_server.store.read_blob(final.files[name].sha256) == (output_dir / "model" / name).read_bytes()
    assert not list(output_dir.glob(".hub-push*")), "a staging folder was left behind"


def test_a_final_push_that_fails_fails_the_run_in_one_line_after_its_outputs(hub_server, tmp_path):
    output_dir = tmp_path / "run"
    hub_server.fail("/commit/", status=500)
    result = train(["--max_train_steps", 2, "--no-do_eval", "--no-do_predict", "--output_dir", output_dir], check=False)
    errors = [line for line in result.stderr.splitlines() if line.startswith("train.py: error: ")]
    assert result.returncode == 1 and len(errors) == 1, result.stderr[-3000:]
    assert "the push did not complete" in errors[0] and f"(the run's outputs in {output_dir} are complete)" in errors[0]
    assert json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))["state"] == "complete"
    assert ModelCard.load(output_dir / "model" / "README.md").data.model_name == REPO_ID
