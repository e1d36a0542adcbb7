"""What the tests build once per test run (a built dataset, tiny models, videos, a training run), shared by the
processes of `pytest -n N`: each thing is a folder keyed by a digest of the code and data that make it.

pytest-xdist gives each worker a session of its own, so a session-scoped fixture alone builds its thing once per
worker. Here the first worker that needs a thing builds it into a folder of the test run, while another that needs
it then waits on the build lock (a `filelock`, which the kernel releases however its holder ends) and finds it
built. A build that fails leaves no completion mark: the next test that needs it builds it again and fails the same
way, on its own.

The folder is the run's (pytest's numbered base folder), not a cache kept between runs: every run builds what it
reads from the code it tests. The digest in each folder's name, of the project's code and data, sets apart the
builds of a run whose code changed under it (an edit while a long run goes on): never one of the other code.

Tests read what is built here and never write into it: a test that needs to change it copies it first.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

import filelock

# The project's packages: their folders hold its code and data (editable installs: the repository's folders).
PROJECT_PACKAGES = (
    "fiberbench",
    "fiberbench.data",
    "fiberbench.leaderboard",
    "fiberbench.lmms_eval_tasks",
    "fiberbench.metric",
    "fiberbench.modeling",
    "fiberbench.predict",
    "fiberbench.training",
)
COMPLETE = "complete.json"
# How long a worker waits for another's build: a training run on a machine busy with other suites can take many
# times its usual minute or two; a build that hangs longer fails the waiting tests, naming the builder.
BUILD_WAIT_SECONDS = 2 * 3600


@cache
def project_digest() -> str:
    """A digest of every file of the project's packages (code, the sample, the tokenizer, configs): what a build
    here may read. Computed once per process, without importing the packages; the same in every worker of a run."""
    digest = hashlib.sha256()
    for package in PROJECT_PACKAGES:
        for root in map(Path, importlib.util.find_spec(package).submodule_search_locations):
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    digest.update(str(path.relative_to(root.parent)).encode() + b"\0")
                    digest.update(path.read_bytes())
    return digest.hexdigest()


def run_folder(tmp_path_factory) -> Path:
    """The folder of this test run that its workers share.

    pytest-xdist gives worker `gwN` the base folder `<run's base>/popen-gwN`: its parent is the run's, made by the
    controller for this run alone. Without xdist, the base folder itself (its parent holds other runs').
    """
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder of `name` built by `build(folder)`, once in this test run whatever the number of workers.

    `folder` exists and is empty when `build` is called. `name` stands for what `build` does beyond reading the
    project's code and data: two different builds have two names.
    """
    key = hashlib.sha256(f"{name}\0{project_digest()}".encode()).hexdigest()
    folder = run_folder(tmp_path_factory) / "built_once" / f"{name}-{key[:16]}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(folder.with_name(f".{folder.name}.building"), timeout=BUILD_WAIT_SECONDS):
        if not (folder / COMPLETE).is_file():
            # A build that failed (or a worker killed) part-way: start again from nothing.
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / COMPLETE).write_text(json.dumps({"name": name, "project": project_digest()}) + "\n")
    return folder


def save_process(process: subprocess.CompletedProcess, path: Path) -> None:
    """Keep a finished process's command, exit status and output beside what it built, for `load_process`."""
    fields = {"args": process.args, "returncode": process.returncode}
    path.write_text(json.dumps(fields | {"stdout": process.stdout, "stderr": process.stderr}), encoding="utf-8")


def load_process(path: Path) -> subprocess.CompletedProcess:
    """The finished process that `save_process` kept, as `subprocess.run` returned it to the worker that ran it."""
    fields = json.loads(path.read_text(encoding="utf-8"))
    return subprocess.CompletedProcess(**fields)
