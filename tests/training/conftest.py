"""Fixtures of the training tests: `accelerate launch training/train.py` in a subprocess, and the main job's outputs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fiberbench.training

TRAIN_SCRIPT = Path(fiberbench.training.__file__).parent / "train.py"
# Training tests run offline, as the main job must.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_train(
    args: list, launch_args: list = (), env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """`accelerate launch [launch_args] training/train.py args`, from the repository root; output captured."""
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        *map(str, launch_args),
        str(TRAIN_SCRIPT),
        *map(str, args),
    ]
    result = subprocess.run(
        command,
        cwd=TRAIN_SCRIPT.parents[1],
        env={**os.environ, **OFFLINE, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited with {result.returncode}\n--- stderr ---\n{result.stderr[-8000:]}")
    return result


@pytest.fixture(scope="session")
def launch():
    """`run_train`: launch the training script in a subprocess (fails the test if it fails, unless check=False)."""
    return run_train


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """The README's main command, `accelerate launch training/train.py`, writing into a temporary folder.

    Returns (output folder, the completed process).
    """
    output_dir = tmp_path_factory.mktemp("main_job") / "sample_demo"
    return output_dir, run_train(["--output_dir", output_dir])
