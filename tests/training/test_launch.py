"""`accelerate launch` as the README and the docs run train.py: with `training/accelerate.yaml` the launcher guesses
no setting, so it warns of none ("`--num_processes` was set to a value of `0`" on a machine without GPUs)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fiberbench.training.launch import ACCELERATE_CONFIG

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).parents[2]
TRAIN_SCRIPT = ACCELERATE_CONFIG.parent / "train.py"
# How `accelerate launch` starts its warning about the settings it guessed (accelerate/commands/launch.py).
LAUNCHER_WARNING = "were not passed to `accelerate launch` and had defaults used instead"
# The line of the README and the docs that names the config; `accelerate config && accelerate launch ...` uses the
# user's own instead.
NAMED = "accelerate launch --config_file training/accelerate.yaml "
USERS_OWN = "accelerate config && accelerate launch "


def launcher_stderr(launch_args: list[str], tmp_path: Path) -> str:
    """What `accelerate launch LAUNCH_ARGS training/train.py --help` prints on stderr on a machine where
    `accelerate config` was never run (a Hugging Face home of its own, without one)."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home")}
    command = [sys.executable, "-m", "accelerate.commands.launch", *launch_args, str(TRAIN_SCRIPT), "--help"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


@pytest.mark.parametrize(
    "launch_args", [[], ["--multi_gpu", "--num_processes", "2"]], ids=["one process", "two processes"]
)
def test_the_documented_launches_guess_nothing_and_warn_of_nothing(tmp_path, launch_args):
    stderr = launcher_stderr(["--config_file", str(ACCELERATE_CONFIG), *launch_args], tmp_path)
    assert LAUNCHER_WARNING not in stderr and "was set to a value of" not in stderr, stderr


def test_the_bare_launcher_warns_so_the_check_above_can_fail(tmp_path):
    assert "`--num_processes` was set to a value of" in launcher_stderr([], tmp_path)


def test_the_main_job_launches_without_the_warning(main_job):
    assert LAUNCHER_WARNING not in main_job[1].stderr


def test_every_documented_launch_of_train_py_names_the_config():
    """Each `accelerate launch` line of a bash block in the README and the docs names training/accelerate.yaml,
    unless it follows the user's own `accelerate config`."""
    documents = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
    launches = []
    for path in documents:
        blocks = re.findall(r"^```bash\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
        launches += [(path.name, line) for block in blocks for line in block.splitlines() if "accelerate launch" in line]
    assert len(launches) > 10
    assert [(name, line) for name, line in launches if NAMED not in line and USERS_OWN not in line] == []
