"""--resume_from_checkpoint REPO_ID[:FOLDER]: a checkpoint on the (local) Hub downloaded and resumed, in a new folder,
as if the run had never stopped; one that would run code, or is not there, refused in one line."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from fiberbench.hub import push_folder

from ..training.conftest import (
    RESUMABLE_RUN,
    TWO_PROCESS_REPO_ID,
    TWO_PROCESS_RUN,
    TWO_PROCESSES,
    Payload,
    assert_same_run,
    refusal_in_process,
    run_train,
)

pytestmark = pytest.mark.slow

REPO_ID = "fiber-org/fiber-t5-resumed"


def test_the_last_checkpoint_on_the_hub_resumes_in_a_new_folder_as_if_never_stopped(
    hub_server, uninterrupted_resumable_run, tmp_path
):
    # The repo as `--hub_strategy checkpoint` leaves it mid-run: the save of step 30 in last-checkpoint/
    # (tests/hub/test_train_hub_strategy.py checks what the Trainer pushes; tests/training/test_train.py resumes a run
    # killed after a save). The reference reads only the bundled sample and the shipped tokenizer: the Hub cannot
    # change what it trains.
    shutil.copytree(uninterrupted_resumable_run / "checkpoint-30", tmp_path / "repo" / "last-checkpoint")
    push_folder(tmp_path / "repo", REPO_ID)
    resumed = tmp_path / "resumed"
    run_train([*RESUMABLE_RUN, "--resume_from_checkpoint", REPO_ID, "--output_dir", resumed], offline=False)
    assert json.loads((resumed / "results.json").read_text())["resumed_from"] == REPO_ID
    assert_same_run(uninterrupted_resumable_run, resumed)


def test_two_processes_resume_a_checkpoint_of_every_checkpoint_pushed(hub_server, two_processes_pushed_run, tmp_path):
    first, _, pushed = two_processes_pushed_run
    hub_server.store.load(pushed)
    # Each process's RNG state; the Trainer pushes the first save's checkpoint (a later one while that push is going
    # is skipped).
    assert {"checkpoint-4/rng_state_0.pth", "checkpoint-4/rng_state_1.pth"} <= set(
        hub_server.history(TWO_PROCESS_REPO_ID)[-1].files)
    resumed = tmp_path / "resumed"
    run_train([*TWO_PROCESS_RUN, "--resume_from_checkpoint", f"{TWO_PROCESS_REPO_ID}:checkpoint-4", "--output_dir",
               resumed], launch_args=TWO_PROCESSES, offline=False)
    weights, other = load_file(first / "model" / "model.safetensors"), load_file(resumed / "model" / "model.safetensors")
    assert weights.keys() == other.keys() and all(weights[name].equal(other[name]) for name in weights)


@pytest.mark.parametrize("resume, message", [
    (f"{REPO_ID}:checkpoint-45", "optimizer.pt: a pickle that would create posix.system when loaded"),
    (f"{REPO_ID}:checkpoint-9", f"the Hub repo {REPO_ID} has no folder checkpoint-9/"),
    ("fiber-org/no-such-run", "no such checkpoint folder, and the Hub at"),
], ids=["tampered", "no such folder", "no such repo"])
def test_a_hub_checkpoint_that_would_run_code_or_is_not_there_is_one_line(
    hub_server, uninterrupted_resumable_run, tmp_path, monkeypatch, capfd, resume, message
):
    tampered = tmp_path / "repo" / "checkpoint-45"
    shutil.copytree(uninterrupted_resumable_run / "checkpoint-45", tampered)
    torch.save({"state": Payload(tmp_path / "payload_ran")}, tampered / "optimizer.pt")
    push_folder(tmp_path / "repo", REPO_ID)
    arguments = [*RESUMABLE_RUN, "--resume_from_checkpoint", resume, "--output_dir", tmp_path / "resumed"]
    line = refusal_in_process(arguments, monkeypatch, capfd)
    assert message in line, line
    assert not (tmp_path / "payload_ran").exists() and not (tmp_path / "resumed").exists()
