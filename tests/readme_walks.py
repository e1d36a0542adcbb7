"""The README's and the documentation's blocks, read from their files and run as a user would, in copies of the
repository ("walks"), each built once per test run (tests/built_once.py): tests/test_readme.py checks what they did,
and the tests that read what a block made (the main job's outputs, a page's training run) read the walk's own, rather
than run the same command again.

A user reads the README, then the pages in the order of mkdocs.yml's `nav`, in one folder. Each document's blocks run
in a walk of their own, started from a copy of the folder as the documents before it leave it where that matters:
after the main job (run first), and for the pages after "The dataset" after that page's blocks too (its `fiber` is the
dataset they read)."""

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import yaml

from .built_once import built_once
from .processes import run_to_end

REPOSITORY = Path(__file__).parents[1]
README = REPOSITORY / "README.md"
DOCS = REPOSITORY / "docs"
# The page whose blocks build `fiber`, the dataset that the pages after it read.
DATASET_PAGE = DOCS / "dataset.md"

# The first line of a block (after a script's `#!` line) that marks it, as docs/index.md's "The examples" says.
NEEDS_HUB = "# needs the Hugging Face Hub"
NOT_RUN = "# not run by the README test: "
MAIN_JOB = "accelerate launch --config_file training/accelerate.yaml training/train.py"
# The languages of the blocks that run; the others (json, bibtex) are read, not run.
RUN_LANGUAGES = {"bash", "python"}
# The settings of the tests that train (tests/training/conftest.py).
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
# What a copy of the repository root leaves out: what a checkout's runs and installs made, not its files.
NOT_COPIED_AT_ROOT = {".git", ".ci", "outputs", "fiber", "runs", "build", "dist"}
NOT_COPIED = shutil.ignore_patterns(".venv*", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")


def not_copied(folder: str, names: list[str]) -> set[str]:
    """`shutil.copytree`'s `ignore`: the names above, and at the root those of a checkout's runs."""
    root = {name for name in names if name in NOT_COPIED_AT_ROOT} if Path(folder) == REPOSITORY else set()
    return root | NOT_COPIED(folder, names)


def documents() -> list[Path]:
    """The README, then the documentation's pages in the order of the site's menu (mkdocs.yml's `nav`)."""
    nav = yaml.safe_load((REPOSITORY / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    return [README, *(DOCS / page for entry in nav for page in entry.values())]


@dataclass
class Block:
    """One fenced block of a document: its file, where it starts (the fence's line), its language and its code."""

    path: Path
    line: int
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPOSITORY)} line {self.line}"

    @property
    def marker(self) -> str:
        """The block's first line, after a script's `#!` line."""
        lines = [line for line in self.code.splitlines() if not line.startswith("#!")]
        return lines[0].strip() if lines else ""

    @property
    def fate(self) -> str:
        if self.marker == NEEDS_HUB:
            return "needs the Hub"
        if self.marker.startswith(NOT_RUN):
            return "not run"
        return "run"

    @property
    def is_main_job(self) -> bool:
        return self.code.strip() == MAIN_JOB

    @property
    def runs_our_command(self) -> bool:
        """Whether the block's first command is ours (`fiberbench`, or train.py under `accelerate launch`), whose
        error is one line; the Python blocks' first Hub call is a library's, with that library's error."""
        commands = [line for line in self.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        return self.language == "bash" and bool(commands) and commands[0].startswith(("fiberbench ", MAIN_JOB))


def document_blocks(path: Path) -> list[Block]:
    """Every fenced block of one document, in order."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    start = language = None
    for number, line in enumerate(lines, start=1):
        if not line.startswith("```"):
            continue
        if start is None:
            start, language = number, line[3:].strip()
        else:
            blocks.append(Block(path, start, language, "\n".join(lines[start : number - 1]) + "\n"))
            start = None
    assert start is None, f"{path.relative_to(REPOSITORY)} line {start}: a block that is never closed"
    return blocks


def readme_blocks() -> list[Block]:
    """Every fenced block of the README and the pages, in the order they are read."""
    return [block for path in documents() for block in document_blocks(path)]


def runnable_blocks(path: Path) -> list[Block]:
    """A document's bash and python blocks, in order."""
    return [block for block in document_blocks(path) if block.language in RUN_LANGUAGES]


def blocks_to_run(path: Path) -> list[Block]:
    """A document's blocks that run: those of `runnable_blocks` not marked as not run."""
    return [block for block in runnable_blocks(path) if block.fate != "not run"]


def main_job_block() -> Block:
    """The main job's block, which runs first of all."""
    return next(block for block in readme_blocks() if block.is_main_job)


# A walk through the documents is a folder of three: `repository`, a copy of the repository root, in which the blocks
# run (their working directory); `hf_home`, their Hugging Face home (no token, and no dataset cached under the name
# `fiber` by an earlier build); `scripts`, the python blocks as script files.
def start_walk(walk: Path, after: Path | None) -> None:
    """Start the walk `walk` from the repository root (`after` None), or from the walk `after` as its blocks left it."""
    if after is None:
        shutil.copytree(REPOSITORY, walk / "repository", ignore=not_copied, symlinks=True)
        (walk / "hf_home").mkdir()
    else:
        for name in ("repository", "hf_home"):
            shutil.copytree(after / name, walk / name, symlinks=True)
    (walk / "scripts").mkdir()


@dataclass
class Run:
    """One block's run: its exit status and output, and its seconds of wall time and of CPU time (user and system,
    of the processes it ran)."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cpu_seconds: float


def children_cpu_seconds() -> float:
    """The CPU time, user and system, of this process's children that have ended (theirs included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_block(block: Block, walk: Path) -> Run:
    """Run one block in the walk `walk`: bash with `-euo pipefail`, Python as a script file (outside the copy, so
    that its imports come from the installed package, as for a user's own script)."""
    if block.language == "bash":
        command = ["bash", "-euo", "pipefail", "-c", block.code]
    else:
        script = walk / "scripts" / f"{block.path.stem}_line_{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        command = [sys.executable, str(script)]
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(OFFLINE, HF_HOME=str(walk / "hf_home"))
    started, cpu_started = time.monotonic(), children_cpu_seconds()
    # A new session, no terminal and no input: nothing can prompt (`hf auth login`) or wait.
    result = run_to_end(
        command, cwd=walk / "repository", env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=600,
    )
    seconds, cpu_seconds = time.monotonic() - started, children_cpu_seconds() - cpu_started
    return Run(result.returncode, result.stdout, result.stderr, seconds, cpu_seconds)


def states(root: Path) -> dict[str, tuple[int, int] | None]:
    """Each path under `root` (bytecode caches aside): a file's size and modification time; None for a folder, whose
    own time changes with its entries."""
    found = {}
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name != "__pycache__"]
        for name in folders:
            found[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            stat = os.lstat(os.path.join(folder, name))
            found[os.path.relpath(os.path.join(folder, name), root)] = (stat.st_size, stat.st_mtime_ns)
    return found


def writes(before: dict, after: dict) -> dict[str, list[str]]:
    """What a walk's blocks did to its copy between two `states`: the paths they made (each the topmost one:
    `outputs/evaluation` for a new folder and all it holds), and those they changed or removed."""
    made = {path for path in after if path not in before}
    return {
        "made": sorted(path for path in made if not any(str(parent) in made for parent in Path(path).parents)),
        "changed": sorted(path for path in before if before[path] != after.get(path, "removed")),
    }


def walked(tmp_path_factory, name: str, after: Path | None, blocks: list[Block]) -> Path:
    """The walk `name`, started from the walk `after` (the repository root when None), in which `blocks` ran: once per
    test run. Their runs and what they did to the copy are kept beside it, for `kept_runs` and `kept_writes`."""

    def build(walk: Path) -> None:
        start_walk(walk, after)
        before = states(walk / "repository")
        runs = [run_block(block, walk) for block in blocks]
        (walk / "runs.json").write_text(json.dumps([asdict(run) for run in runs]), encoding="utf-8")
        (walk / "writes.json").write_text(json.dumps(writes(before, states(walk / "repository"))), encoding="utf-8")

    return built_once(tmp_path_factory, f"readme_{name}", build)


def kept_runs(walk: Path) -> list[Run]:
    return [Run(**fields) for fields in json.loads((walk / "runs.json").read_text(encoding="utf-8"))]


def kept_writes(walk: Path) -> dict[str, list[str]]:
    return json.loads((walk / "writes.json").read_text(encoding="utf-8"))


def after_main_job(tmp_path_factory) -> Path:
    """The walk in which the main job ran, first of all blocks: the start of every document's."""
    return walked(tmp_path_factory, "after_main_job", None, [main_job_block()])


def after_dataset_page(tmp_path_factory) -> Path:
    """The walk in which "The dataset"'s blocks ran after the main job: the start of the pages after it, which read
    its `fiber`."""
    return walked(tmp_path_factory, "after_dataset_page", after_main_job(tmp_path_factory), walk_blocks(DATASET_PAGE))


def walk_blocks(document: Path) -> list[Block]:
    """The blocks that run in `document`'s walk, in order: its blocks to run, the main job aside (run before all)."""
    return [block for block in blocks_to_run(document) if not block.is_main_job]


def document_walk(tmp_path_factory, document: Path) -> Path:
    """The walk in which `document`'s `walk_blocks` ran: after the main job, and for the pages after "The dataset"
    after that page's blocks (that page's walk is the one they start from)."""
    if document == DATASET_PAGE:
        return after_dataset_page(tmp_path_factory)
    if documents().index(document) > documents().index(DATASET_PAGE):
        start = after_dataset_page(tmp_path_factory)
    else:
        start = after_main_job(tmp_path_factory)
    return walked(tmp_path_factory, f"walk_{document.stem}", start, walk_blocks(document))


def block_run(tmp_path_factory, document: Path, output: str) -> tuple[Path, Run]:
    """The run of `document`'s one block that writes `output`, in its walk (`document_walk`, once per test run): the
    walk's repository, where `output` is, and the finished run. A block that failed fails the test that reads it."""
    walk = document_walk(tmp_path_factory, document)
    [run] = [run for block, run in zip(walk_blocks(document), kept_runs(walk)) if output in block.code]
    if run.returncode != 0:
        pytest.fail(
            f"The block of {document.name} that writes {output} exited with {run.returncode}\n"
            f"--- stderr ---\n{run.stderr[-8000:]}"
        )
    return walk / "repository", run
