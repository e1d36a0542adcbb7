"""Fixtures of the training tests: `accelerate launch training/train.py` in a subprocess, and the outputs of the
documents' runs of it (the main job, and the main job without video)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fiberbench.training
from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG, read_config
from fiberbench.training.launch import ACCELERATE_CONFIG

from ..processes import run_to_end
from ..readme_walks import DOCS, MAIN_JOB, after_main_job, block_run, kept_runs

TRAIN_SCRIPT = Path(fiberbench.training.__file__).parent / "train.py"
# Training tests run offline, as the main job must.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def train_command(args: list, launch_args: list = ()) -> list[str]:
    """`accelerate launch --config_file training/accelerate.yaml [launch_args] training/train.py args`, as an argv:
    as the README launches it (`launch_args` replace the config's settings)."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(ACCELERATE_CONFIG),
        *map(str, launch_args),
        str(TRAIN_SCRIPT),
        *map(str, args),
    ]


def train_env(env: dict | None = None) -> dict:
    return {**os.environ, **OFFLINE, **(env or {})}


def run_train(
    args: list, launch_args: list = (), env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run the training script to its end, from the repository root; output captured."""
    command = train_command(args, launch_args)
    result = run_to_end(
        command, cwd=TRAIN_SCRIPT.parents[1], env=train_env(env), capture_output=True, text=True, timeout=600
    )
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited with {result.returncode}\n--- stderr ---\n{result.stderr[-8000:]}")
    return result


def kill_train_after(args: list, path: Path, timeout: float = 300, during: str | None = None) -> bool:
    """Start the training script and SIGKILL it, launcher and workers, as soon as `path` exists.

    With `during` (a glob pattern beside `path`, e.g. a staging folder), wait until `path` exists
    and a match of `during` does too; the run is then stopped (SIGSTOP), and killed if the match
    is still there, else let go on. Returns whether it was killed at such a moment.
    """
    process = subprocess.Popen(
        train_command(args),
        cwd=TRAIN_SCRIPT.parents[1],
        env=train_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def caught() -> bool:
        staged = (
            [match for match in path.parent.glob(during) if not match.name.endswith("-previous")] if during else [1]
        )
        return path.exists() and bool(staged)

    deadline = time.monotonic() + timeout
    killed = False
    while not killed and process.poll() is None and time.monotonic() < deadline:
        if caught():
            os.killpg(process.pid, signal.SIGSTOP)
            if caught():
                os.killpg(process.pid, signal.SIGKILL)
                killed = True
            else:
                os.killpg(process.pid, signal.SIGCONT)
        time.sleep(0.001 if during else 0.05)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    if during is None and not path.exists():
        pytest.fail(f"The training run never wrote {path} (exit code {process.returncode}).")
    return killed


@pytest.fixture(scope="session")
def launch_and_kill():
    """`kill_train_after`: start the training script and kill it once a checkpoint exists."""
    return kill_train_after


@pytest.fixture(scope="session")
def launch():
    """`run_train`: launch the training script in a subprocess (fails the test if it fails, unless check=False)."""
    return run_train


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """The README's main job, `accelerate launch --config_file training/accelerate.yaml training/train.py`, as the
    README test runs it (tests/readme_walks.py's `after_main_job`, offline, in a copy of the repository): run once per
    test run, for the README test and the tests that read what it wrote.

    Returns (output folder, the finished process: its `returncode`, `stdout` and `stderr`).
    """
    walk = after_main_job(tmp_path_factory)
    [run] = kept_runs(walk)
    if run.returncode != 0:
        pytest.fail(f"{MAIN_JOB} exited with {run.returncode}\n--- stderr ---\n{run.stderr[-8000:]}")
    return walk / "repository" / read_config(SAMPLE_DEMO_CONFIG)["output_dir"], run


# The page whose blocks train the main job's model without video, into TEXT_ONLY_OUTPUT.
TEXT_ONLY_PAGE = DOCS / "score-your-own-system.md"
TEXT_ONLY_OUTPUT = "outputs/text_only"


@pytest.fixture(scope="session")
def text_only_job(tmp_path_factory):
    """The main job without video, `... training/train.py --fusion none --output_dir outputs/text_only`, as
    docs/score-your-own-system.md runs it after the main job (tests/readme_walks.py's walk of that page): run once per
    test run, for the README test and the tests that compare with it. Returns its output folder."""
    repository, _ = block_run(tmp_path_factory, TEXT_ONLY_PAGE, TEXT_ONLY_OUTPUT)
    return repository / TEXT_ONLY_OUTPUT


# A short run that writes checkpoints (every 2 of its 4 steps) and nothing else: tests/conftest.py's
# `short_checkpointed_run`, which the Hub tests read too.
SHORT_RUN = ["--max_train_steps", 4, "--checkpointing_steps", 2, "--no-do_eval", "--no-do_predict"]
# Two epochs of 25 steps, a checkpoint every 15 (steps 15, 30 and 45), one data loader worker: the run that the
# kill-and-resume tests (here and on the Hub) kill, resume, and compare with tests/conftest.py's
# `uninterrupted_resumable_run`, the same run left to finish.
RESUMABLE_RUN = ["--num_train_epochs", 2, "--checkpointing_steps", 15, "--dataloader_num_workers", 1]
# `--multi_gpu` on a machine without GPUs: train.py makes the processes one CPU group (gloo).
TWO_PROCESSES = ["--multi_gpu", "--num_processes", 2]
# 8 steps, a checkpoint every 4 (step_4 and step_8), nothing evaluated: what tests/conftest.py's
# `two_processes_pushed_run` trains (and pushes to TWO_PROCESS_REPO_ID).
TWO_PROCESS_RUN = ["--max_train_steps", 8, "--checkpointing_steps", 4, "--no-do_eval", "--no-do_predict"]
TWO_PROCESS_REPO_ID = "fiber-org/fiber-t5-run"


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    """The `train.py: error: ...` lines of a failed run, one per process that failed.

    The launcher may add its own report of the failed process after them; nothing comes before.
    """
    lines = [line for line in result.stderr.splitlines() if line.startswith("train.py: error: ")]
    assert result.returncode != 0 and lines, result.stderr[-3000:]
    assert "Traceback" not in result.stderr.split(lines[0])[0], result.stderr[-3000:]
    return lines


@pytest.fixture(scope="session")
def failure_lines():
    """`error_lines`: the one-line errors of a failed run."""
    return error_lines
