"""train.py --push_to_hub --hub_strategy against the local Hub: pushes while training, and resuming from the Hub."""

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file

import fiberbench.training
from fiberbench.hub import push_files
from fiberbench.ownership import FOLDER_RECORD
from fiberbench.training.launch import ACCELERATE_CONFIG

from ..processes import run_to_end
from ..training.conftest import RESUMABLE_RUN, TWO_PROCESS_REPO_ID, TWO_PROCESS_RUN, TWO_PROCESSES


pytestmark = pytest.mark.slow

TRAIN_SCRIPT = Path(fiberbench.training.__file__).parent / "train.py"
# As the README launches train.py: one process, every launcher setting given by the config.
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ACCELERATE_CONFIG)]
REPO_ID = TWO_PROCESS_REPO_ID
FINAL = "FIBER model trained with fiberbench"
# A loadable model: weights, config, the remote code and the processor.
MODEL_FILES = ("config.json", "model.safetensors", "modeling_fiber_t5.py", "processor_config.json", "README.md")


def train_command(args: list, push: bool = True) -> list[str]:
    pushing = ["--push_to_hub", "--hub_model_id", REPO_ID] if push else []
    return [*LAUNCH, str(TRAIN_SCRIPT), *map(str, args), *pushing]


def train_env() -> dict:
    return {**os.environ, "TOKENIZERS_PARALLELISM": "false"}


def train(args: list, check: bool = True, push: bool = True) -> subprocess.CompletedProcess:
    """Run train.py to its end with this test's environment (pointed at the local Hub)."""
    result = run_to_end(
        train_command(args, push),
        env=train_env(),
        cwd=TRAIN_SCRIPT.parents[1],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and result.returncode != 0:
        pytest.fail(f"train.py exited with {result.returncode}\n{result.stderr[-8000:]}")
    return result


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
    assert len(failures) == 1, failures
    # The second push is refused: step 8's, or step 12's where step 4's push was still going at step 12's save (a
    # busy machine), so that step 8's, not started yet, was left to step 12's, which carries all it would have.
    match = re.search(r"The push of step (8|12) failed; training goes on", failures[0])
    assert match, failures
    refused = int(match[1])
    pushed = hub_server.history(REPO_ID)
    titles = [commit.title for commit in pushed]
    # The next push went through: step 12's, or the final model's.
    steps = [4, 12, 12] if refused == 8 else [4, 12]
    assert titles == ["initial commit", *[f"Training in progress, step {step}" for step in steps[:-1]], FINAL]
    record = json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))
    for commit, step in zip(pushed[1:], steps, strict=True):
        # Only the model's files this run wrote (every_save pushes no checkpoint), with a card naming the step.
        assert sorted(commit.files) == sorted([".gitattributes", *record["entries"]["model"]])
        card = text(hub_server, commit, "README.md")
        assert f"after **{step} optimizer steps" in card
        assert ("final model" in card) == (commit.title == FINAL)
    final = pushed[-1]
    for name in record["entries"]["model"]:
        assert hub_server.store.read_blob(final.files[name].sha256) == (output_dir / "model" / name).read_bytes()
    assert not list(output_dir.glob(".hub-push*")), "a staging folder was left behind"
    training = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))["training"]
    assert training["step_seconds"] > 0 and training["save_seconds"] > 0  # what bench/train.py --hub_push compares


def test_a_final_push_that_fails_fails_the_run_in_one_line_after_its_outputs(hub_server, tmp_path):
    output_dir = tmp_path / "run"
    hub_server.fail("/commit/", status=500)
    result = train(["--max_train_steps", 2, "--no-do_eval", "--no-do_predict", "--output_dir", output_dir], check=False)
    errors = [line for line in result.stderr.splitlines() if line.startswith("train.py: error: ")]
    assert result.returncode == 1 and len(errors) == 1, result.stderr[-3000:]
    assert "the push did not complete" in errors[0] and f"(the run's outputs in {output_dir} are complete)" in errors[0]
    assert json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))["state"] == "complete"
    assert ModelCard.load(output_dir / "model" / "README.md").data.model_name == REPO_ID


def last_checkpoint_step(hub, commit) -> int | None:
    """The step of the checkpoint in a commit's last-checkpoint/, if it has one."""
    stored = commit.files.get("last-checkpoint/training_progress.json")
    return None if stored is None else json.loads(hub.store.read_blob(stored.sha256))["completed_steps"]


def kill_when(args: list, condition, timeout: float = 300) -> None:
    """Start train.py and SIGKILL it, launcher and workers, once `condition()` holds (checked every 50 ms)."""
    process = subprocess.Popen(
        train_command(args),
        env=train_env(),
        cwd=TRAIN_SCRIPT.parents[1],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline and not condition():
        time.sleep(0.05)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def same_weights(folder, other) -> bool:
    weights, other_weights = load_file(folder / "model.safetensors"), load_file(other / "model.safetensors")
    return weights.keys() == other_weights.keys() and all(weights[name].equal(other_weights[name]) for name in weights)


def test_a_run_killed_after_its_second_save_resumes_from_the_hub_in_a_fresh_folder_as_if_never_stopped(
    hub_server, uninterrupted_resumable_run, tmp_path
):
    # 25 steps per epoch: saves at steps 15 and 30 (checkpoints) and 25 (the first best model). The reference is the
    # training tests' run of the same settings, left to finish without the Hub (it pushes nothing, and reads only the
    # bundled sample and the shipped tokenizer: the local Hub cannot change what it trains).
    uninterrupted, killed, resumed = uninterrupted_resumable_run, tmp_path / "killed", tmp_path / "resumed"

    def second_checkpoint_pushed() -> bool:
        return ("model", REPO_ID) in hub_server.store.repos and any(
            (last_checkpoint_step(hub_server, commit) or 0) >= 30 for commit in hub_server.history(REPO_ID)
        )

    kill_when([*RESUMABLE_RUN, "--hub_strategy", "checkpoint", "--output_dir", killed], second_checkpoint_pushed)
    assert second_checkpoint_pushed() and not (killed / "predictions.jsonl").exists(), "not killed mid-run"
    pushed = hub_server.history(REPO_ID)[1:]
    # After each save, the repo holds the model (with its code, processor and card) and last-checkpoint/.
    assert {15, 30} <= {last_checkpoint_step(hub_server, commit) for commit in pushed}
    for commit in pushed:
        assert set(MODEL_FILES) <= set(commit.files)
        step = last_checkpoint_step(hub_server, commit)
        model_step = 15 if step == 15 and commit.title.endswith("step 15") else 25
        assert f"after **{model_step} optimizer steps" in text(hub_server, commit, "README.md"), commit.title
        checkpoint = killed / f"step_{step}"
        for path, stored in commit.files.items():
            if path.startswith("last-checkpoint/"):
                local = checkpoint / path.removeprefix("last-checkpoint/")
                assert hub_server.store.read_blob(stored.sha256) == local.read_bytes(), path
    on_the_hub = last_checkpoint_step(hub_server, pushed[-1])

    resume = ["--resume_from_checkpoint", REPO_ID, "--output_dir", resumed]
    result = train([*RESUMABLE_RUN, "--hub_strategy", "checkpoint", *resume])
    assert f"Resuming from {REPO_ID} (commit " in result.stderr
    # Its workers were not forked from a process whose pushing thread may hold the Hub client's lock.
    assert "1 data loader workers (started from a forkserver: this process pushes while it trains)" in result.stderr
    results = json.loads((resumed / "results.json").read_text(encoding="utf-8"))
    # What the resume read is what the killed run had saved: the cache's copy equals its local checkpoint.
    downloaded = Path(os.environ["HF_HUB_CACHE"]) / f"models--{REPO_ID.replace('/', '--')}" / "snapshots"
    downloaded = downloaded / results["resumed_from"]["commit"] / "last-checkpoint"
    for file in (killed / f"step_{on_the_hub}").rglob("*"):
        if file.is_file():
            assert (downloaded / file.relative_to(killed / f"step_{on_the_hub}")).read_bytes() == file.read_bytes()
    # The resumed run is the uninterrupted one: weights, scores and history.
    assert same_weights(uninterrupted / "model", resumed / "model")
    assert same_weights(uninterrupted / "step_45", (resumed if on_the_hub < 45 else killed) / "step_45")
    expected = json.loads((uninterrupted / "results.json").read_text(encoding="utf-8"))
    for split in ("validation", "test"):
        for name in ("exact_match", "f1", "correct_at_k", "map"):
            assert results[split][name] == expected[split][name], (split, name)
    assert results["training"]["epochs"] == expected["training"]["epochs"]
    # The resumed run pushed on into the same repo: its final model, and the last checkpoint.
    final = hub_server.history(REPO_ID)[-1]
    assert final.title == FINAL and last_checkpoint_step(hub_server, final) == 45
    assert hub_server.store.read_blob(final.files["model.safetensors"].sha256) == (
        resumed / "model" / "model.safetensors"
    ).read_bytes()


class Payload:
    """Runs a shell command when unpickled: what a tampered checkpoint file would hold."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def short_checkpoint(short_checkpointed_run):
    """The last checkpoint of a short run (step_4 of 4), written without the Hub: the training tests' run."""
    return short_checkpointed_run / "step_4"


@pytest.mark.parametrize(
    "file, tamper, message",
    [
        ("custom_checkpoint_0.pkl", lambda path, payload: pickle.dumps(payload), "a pickle that train.py never writes"),
        ("optimizer.bin", lambda path, payload: torch_saved({"state": payload}), "holds more than tensors and numbers"),
        (
            "model.safetensors",
            lambda path, payload: path.read_bytes()[:-1000],
            "cannot be loaded into this run (a damaged file: model.safetensors",
        ),
    ],
    ids=["unknown pickle", "state file payload", "truncated weights"],
)
def test_a_tampered_last_checkpoint_on_the_hub_is_refused_in_one_line_and_nothing_runs(
    hub_server, short_checkpoint, tmp_path, file, tamper, message
):
    marker = tmp_path / "payload_ran"
    files = {path.name: path.read_bytes() for path in short_checkpoint.iterdir()}
    files[file] = tamper(short_checkpoint / file, Payload(marker))
    folder = tmp_path / "tampered"
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_bytes(content)
    push_files({f"last-checkpoint/{name}": folder / name for name in files}, REPO_ID, commit_message="x", source="test")

    output_dir = tmp_path / "resumed"
    settings = ["--max_train_steps", 4, "--no-do_eval", "--no-do_predict", "--output_dir", output_dir]
    result = train([*settings, "--resume_from_checkpoint", REPO_ID], check=False, push=False)
    errors = [line for line in result.stderr.splitlines() if line.startswith("train.py: error: ")]
    assert result.returncode != 0 and len(errors) == 1 and message in errors[0], result.stderr[-3000:]
    # The launcher reports the failed process after the line, with its own traceback; nothing comes before.
    assert "Traceback" not in result.stderr.split(errors[0])[0]
    assert not marker.exists(), "the checkpoint's pickle payload ran"
    assert "Training on" not in result.stderr and not output_dir.exists()


def torch_saved(obj) -> bytes:
    """The bytes `torch.save` writes for `obj`."""
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def test_two_processes_push_every_checkpoint_and_resume_one_from_the_hub_bit_identically(
    hub_server, two_processes_pushed_run, tmp_path
):
    # The first run, made once for this test and the training tests' resume of a 2-process run from its folder:
    # TWO_PROCESS_RUN, pushing all its checkpoints to a local Hub, which this test's Hub now holds as it left it.
    first, first_result, pushed = two_processes_pushed_run
    hub_server.store.load(pushed)
    resumed = tmp_path / "resumed"
    settings = [*TWO_PROCESS_RUN, "--hub_strategy", "all_checkpoints"]
    command = [*LAUNCH, *map(str, TWO_PROCESSES), str(TRAIN_SCRIPT)]
    command += map(str, [*settings, "--resume_from_checkpoint", f"{REPO_ID}:step_4", "--output_dir", resumed])
    command += ["--push_to_hub", "--hub_model_id", REPO_ID]
    result = run_to_end(
        command, env=train_env(), cwd=TRAIN_SCRIPT.parents[1], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-5000:]
    for run in (first_result, result):
        assert "8 steps of 32 examples (2 processes)" in run.stderr
    final = hub_server.history(REPO_ID)[-1]
    assert {"step_4/random_states_1.pkl", "step_8/random_states_1.pkl"} <= set(final.files)
    assert f"Resuming from {REPO_ID}:step_4 (commit " in result.stderr
    assert same_weights(first / "step_8", resumed / "step_8") and same_weights(first / "model", resumed / "model")
    assert not (resumed / "step_4").exists()
