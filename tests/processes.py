"""Commands the tests run to their end in a process group of their own, so that a timeout stops all of it; and the
libraries a fresh interpreter loads to run some code (`modules_loaded`).

`subprocess.run(..., timeout=...)` kills the process it started and no other: a launcher's children (train.py under
`accelerate launch`, a run's loader workers) would go on running, and holding the machine, after the test failed.
"""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable

# How long a timed-out group has to end after SIGTERM (torchrun stops its workers then) before SIGKILL.
GRACE_SECONDS = 10


def run_to_end(command: list, *, timeout: float, input: str | None = None, capture_output: bool = False, **kwargs):
    """`subprocess.run(command, timeout=timeout, ...)`, but on the timeout the command's whole process group is
    stopped (SIGTERM, then SIGKILL) before `subprocess.TimeoutExpired` is raised."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with subprocess.Popen(command, start_new_session=True, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(process)
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def stop_group(process: subprocess.Popen) -> None:
    """Stop the process group that `process` leads: SIGTERM, then SIGKILL to what is left after `GRACE_SECONDS`."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
        except ProcessLookupError:
            return
        try:
            process.communicate(timeout=GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            continue


def modules_loaded(code: str, modules: Iterable[str], **kwargs) -> tuple[list[str], subprocess.CompletedProcess]:
    """Which of `modules` a fresh interpreter holds once it has run Python `code` (sorted), and the finished process:
    how a test says that a command answers without loading a heavy library. `code` that fails fails the test, with
    its stderr; `kwargs` go to `subprocess.run` (cwd, env)."""
    report = f"\nimport json, sys\nprint(json.dumps(sorted(sys.modules.keys() & {sorted(modules)!r})))\n"
    command = [sys.executable, "-c", code + report]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, **kwargs)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1]), result
