"""The examples of README.md and of the documentation's pages, run as written: every bash and python block,
offline, from a copy of the repository root after the main job, each document's blocks in order; a block marked as
needing the Hub is checked to fail offline, and a block marked as not run says why.

A user reads the README, then the pages in the order of mkdocs.yml's `nav`, in one folder. Here each document with
blocks to run is a test of its own, so that pytest-xdist spreads them, and each starts from a copy of the folder as
the documents before it leave it where that matters: after the main job (run first, once per test run), and for the
pages after "The dataset" after that page's blocks too (its `fiber` is the dataset they read; run once, after the
main job). That no document reads what another wrote, these two aside, shows when it runs: its block fails. That
none changes what it started from, nor makes a path that another makes (the later would meet the earlier's), each
document's test checks on its copy (the Hugging Face home, a cache, aside)."""

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import yaml

from .built_once import built_once, run_folder

REPOSITORY = Path(__file__).parents[1]
README = REPOSITORY / "README.md"
DOCS = REPOSITORY / "docs"
# The page whose blocks build `fiber`, the dataset that the pages after it read.
DATASET_PAGE = DOCS / "dataset.md"

# The first line of a block (after a script's `#!` line) that marks it, as docs/index.md's "The examples" says.
NEEDS_HUB = "# needs the Hugging Face Hub"
NOT_RUN = "# not run by the README test: "
MAIN_JOB = "accelerate launch --config_file training/accelerate.yaml training/train.py"
# Every fenced block of the README and the pages, by language: a new block changes these counts, and the table that
# test_readme_blocks_run_as_written prints for its document (one with blocks to run) says what became of it (run,
# checked to fail offline, or not run).
EXPECTED_BLOCKS = {"bash": 33, "python": 7, "json": 2, "bibtex": 1}
RUN_LANGUAGES = {"bash", "python"}
EXPECTED_FATES = {"run": 15, "needs the Hub": 11, "not run": 14}

# One line of ours, as the CLI and train.py print a user error (tests/conftest.py's `user_error`).
OUR_ERROR = re.compile(r"^(fiberbench [\w-]+|train\.py): error: ", re.MULTILINE)
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


def test_every_page_is_in_the_menu():
    """A page left out of mkdocs.yml's `nav` would have its blocks left out of the run below."""
    assert sorted(DOCS.glob("*.md")) == sorted(documents()[1:])


def test_readme_blocks_are_classified():
    """Each block is of a known language with a known fate, in the numbers above: none slips by unclassified."""
    blocks = readme_blocks()
    languages = {language: sum(block.language == language for block in blocks) for language in EXPECTED_BLOCKS}
    assert languages == EXPECTED_BLOCKS and len(blocks) == sum(EXPECTED_BLOCKS.values()), [
        (block.where, block.language) for block in blocks
    ]
    runnable = [block for block in blocks if block.language in RUN_LANGUAGES]
    fates = {fate: sum(block.fate == fate for block in runnable) for fate in EXPECTED_FATES}
    assert fates == EXPECTED_FATES, [(block.where, block.fate) for block in runnable]
    assert [block.where for block in runnable if block.is_main_job] == [
        block.where for block in runnable if block.code.startswith(MAIN_JOB)
    ], "one block is the main job, the command alone"
    assert sum(block.is_main_job for block in runnable) == 1
    for block in runnable:
        if block.fate == "not run":
            assert block.marker[len(NOT_RUN) :].strip(), f"{block.where}: say why it is not run"


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
    result = subprocess.run(
        command, cwd=walk / "repository", env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=600, start_new_session=True,
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


@pytest.fixture(scope="session")
def after_main_job(tmp_path_factory) -> Path:
    """The walk in which the main job ran, first of all blocks: the start of every document's."""
    return walked(tmp_path_factory, "after_main_job", None, [main_job_block()])


@pytest.fixture(scope="session")
def after_dataset_page(tmp_path_factory, after_main_job) -> Path:
    """The walk in which "The dataset"'s blocks ran after the main job: the start of the pages after it, which read
    its `fiber`."""
    return walked(tmp_path_factory, "after_dataset_page", after_main_job, blocks_to_run(DATASET_PAGE))


def clashes(records: Path, document: Path, made: list[str]) -> list[str]:
    """Keep in `records` the paths that `document`'s blocks made, and name those that another document's blocks, kept
    there, made too (in one folder, the later would meet the earlier's). Of two such documents whose records share a
    folder, the one kept last sees the other's."""
    records.mkdir(exist_ok=True)
    name = str(document.relative_to(REPOSITORY)).replace("/", "--")
    partial = records / f"{name}.partial"
    partial.write_text(json.dumps(made), encoding="utf-8")
    partial.replace(records / f"{name}.json")
    found = []
    for record in sorted(records.glob("*.json")):
        if record.stem != name:
            theirs = json.loads(record.read_text(encoding="utf-8"))
            found += [
                f"{mine} (and {record.stem.replace('--', '/')}'s {other})"
                for mine in made
                for other in theirs
                if mine == other or mine.startswith(f"{other}/") or other.startswith(f"{mine}/")
            ]
    return found


def check_block(block: Block, run: Run) -> str | None:
    """What is wrong with a block's run, or None."""
    output = f"--- stdout ---\n{run.stdout[-3000:]}\n--- stderr ---\n{run.stderr[-5000:]}"
    if block.fate == "run":
        if run.returncode != 0:
            return f"exited with {run.returncode}\n{output}"
        if "Traceback" in run.stderr:
            return f"ran, but printed a traceback\n{output}"
        return None
    if run.returncode == 0:
        return f"needs the Hub, yet ran offline with exit status 0\n{output}"
    if block.runs_our_command:
        errors = OUR_ERROR.findall(run.stderr)
        first = OUR_ERROR.search(run.stderr)
        # Under `accelerate launch` the launcher adds its own report after our line: not ours to change.
        if len(errors) != 1 or "Traceback" in run.stderr[: first.start()]:
            return f"offline, not one error line of ours before anything else\n{output}"
    return None


def test_what_blocks_did_is_seen(tmp_path):
    """The checks that let each document run in a copy of its own: what a document's blocks made, changed or removed
    is seen, and what two documents both made is named."""
    copy = tmp_path / "repository"
    (copy / "outputs" / "sample_demo").mkdir(parents=True)
    (copy / "outputs" / "sample_demo" / "results.json").write_text("{}")
    (copy / "outputs" / "sample_demo" / "model.safetensors").write_text("weights")
    before = states(copy)
    (copy / "outputs" / "evaluation" / "plots").mkdir(parents=True)
    (copy / "outputs" / "evaluation" / "plots" / "by_category.png").write_text("png")
    (copy / "outputs" / "sample_demo" / "results.json").write_text('{"f1": 1}')
    (copy / "outputs" / "sample_demo" / "model.safetensors").unlink()
    (copy / "outputs" / "__pycache__").mkdir()
    done = writes(before, states(copy))
    assert done == {
        "made": ["outputs/evaluation"],
        "changed": ["outputs/sample_demo/model.safetensors", "outputs/sample_demo/results.json"],
    }

    records = tmp_path / "made"
    assert clashes(records, DOCS / "index.md", ["outputs/evaluation", "outputs/site"]) == []
    assert clashes(records, DOCS / "hub.md", ["outputs/hub"]) == []
    assert clashes(records, README, ["outputs/evaluation/plots", "outputs/my_scores"]) == [
        "outputs/evaluation/plots (and docs/index.md's outputs/evaluation)"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("document", [path for path in documents() if blocks_to_run(path)], ids=lambda path: path.name)
def test_readme_blocks_run_as_written(document, request, tmp_path, tmp_path_factory):
    """A document's blocks walked as a new user would, offline, in order: after the main job, and for the pages after
    "The dataset" after that page's blocks; neither changing what they started from nor making what another made."""
    blocks = runnable_blocks(document)
    start = request.getfixturevalue("after_main_job")
    runs = {block.line: run for block, run in zip([main_job_block()], kept_runs(start)) if block.path == document}
    if document == DATASET_PAGE:
        walk = request.getfixturevalue("after_dataset_page")
        runs |= {block.line: run for block, run in zip(blocks_to_run(document), kept_runs(walk))}
        done = kept_writes(walk)
    else:
        if documents().index(document) > documents().index(DATASET_PAGE):
            start = request.getfixturevalue("after_dataset_page")
        start_walk(tmp_path, start)
        before = states(tmp_path / "repository")
        runs |= {block.line: run_block(block, tmp_path) for block in blocks_to_run(document) if not block.is_main_job}
        done = writes(before, states(tmp_path / "repository"))

    table, failures = [], []
    for block in blocks:
        run = runs.get(block.line)
        problem = None if run is None else check_block(block, run)
        if run is None:
            fate = "not run: " + block.marker[len(NOT_RUN) :]
        elif problem:
            fate = "FAILED"
            failures.append(f"{block.where} ({block.language}): {problem}")
        elif block.fate == "run":
            fate = "ran"
        elif block.runs_our_command:
            line = run.stderr[OUR_ERROR.search(run.stderr).start() :].splitlines()[0]
            fate = f"needs the Hub: failed offline, one line of ours (exit {run.returncode}): {line[:90]}"
        else:
            fate = f"needs the Hub: failed offline, a library's error (exit {run.returncode})"
        seconds = "" if run is None else f"{run.seconds:6.1f} s {run.cpu_seconds:6.1f} s"
        table.append(f"{block.where:40} {block.language:6} {seconds:>17}  {fate}")
    if done["changed"]:
        failures.append(f"changed or removed what the documents before it left, which the later ones read: "
                        f"{', '.join(done['changed'][:20])}")
    if made_twice := clashes(run_folder(tmp_path_factory) / "readme_made", document, done["made"]):
        failures.append(f"made what another document made too: {', '.join(made_twice[:20])}")
    report = "\n".join(table)
    print(f"\nThe bash and python blocks of {document.relative_to(REPOSITORY)} (wall, CPU):\n{report}")
    assert not failures, "\n\n".join(failures) + f"\n\n{report}"
