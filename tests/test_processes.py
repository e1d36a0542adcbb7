"""The tests' own way to run a command to its end: a timeout stops the command's children too."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .processes import run_to_end

# A launcher that starts a child and waits for it, as `accelerate launch` does with train.py. The child says its pid,
# then sleeps; if it is still alive a minute later, it leaves a file that says so.
LAUNCHER = """
import subprocess, sys
child = '''
import os, pathlib, sys, time
print(os.getpid(), flush=True)
time.sleep(60)
pathlib.Path(sys.argv[1]).write_text("outlived the timeout")
'''
subprocess.run([sys.executable, "-c", child, sys.argv[1]])
"""


def ends(pid: int, within: float = 10) -> bool:
    """Whether process `pid` is gone, or a zombie (ended, not yet reaped by the machine's init), within `within`
    seconds."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_a_command_that_times_out_is_stopped_with_its_children(tmp_path):
    outlived = tmp_path / "outlived"
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        run_to_end([sys.executable, "-c", LAUNCHER, str(outlived)], timeout=5, capture_output=True, text=True)
    # What was read before the timeout, as bytes (subprocess decodes only what a finished process wrote).
    output = timed_out.value.output
    assert output, "the child did not say its pid within the timeout"
    assert ends(int(output.split()[0]))
    assert not outlived.exists()


def test_a_command_that_ends_in_time_is_as_subprocess_run_returns_it():
    reverse = [sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1])"]
    result = run_to_end(reverse, timeout=60, input="abc", capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "cba\n", "")
