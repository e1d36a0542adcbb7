"""The examples of README.md and of the documentation's pages, run as written: every bash and python block,
offline, from a copy of the repository root after the main job, in one order (the README, then the pages in the
order of mkdocs.yml's `nav`); a block marked as needing the Hub is checked to fail offline, and a block marked as
not run says why."""

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPOSITORY = Path(__file__).parents[1]
README = REPOSITORY / "README.md"
DOCS = REPOSITORY / "docs"

# The first line of a block (after a script's `#!` line) that marks it, as docs/index.md's "The examples" says.
NEEDS_HUB = "# needs the Hugging Face Hub"
NOT_RUN = "# not run by the README test: "
MAIN_JOB = "accelerate launch --config_file training/accelerate.yaml training/train.py"
# Every fenced block of the README and the pages, by language: a new block changes these counts, and the table
# that test_readme_blocks_run_as_written prints says what became of each (run, checked to fail offline, or not run).
EXPECTED_BLOCKS = {"bash": 33, "python": 7, "json": 2, "bibtex": 1}
RUN_LANGUAGES = {"bash", "python"}
EXPECTED_FATES = {"run": 15, "needs the Hub": 11, "not run": 14}

# One line of ours, as the CLI and train.py print a user error (tests/conftest.py's `user_error`).
OUR_ERROR = re.compile(r"^(fiberbench [\w-]+|train\.py): error: ", re.MULTILINE)
# The settings of the tests that train (tests/training/conftest.py), and a Hugging Face home of its own: no
# token, and no dataset cached under the name `fiber` by an earlier build.
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


def run_block(block: Block, workdir: Path, scripts: Path, env: dict) -> subprocess.CompletedProcess:
    """Run one block from `workdir`: bash with `-euo pipefail`, Python as a script file (outside `workdir`, so
    that its imports come from the installed package, as for a user's own script)."""
    if block.language == "bash":
        command = ["bash", "-euo", "pipefail", "-c", block.code]
    else:
        script = scripts / f"{block.path.stem}_line_{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        command = [sys.executable, str(script)]
    # A new session, no terminal and no input: nothing can prompt (`hf auth login`) or wait.
    return subprocess.run(
        command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
        start_new_session=True,
    )


def check_block(block: Block, result: subprocess.CompletedProcess) -> str | None:
    """What is wrong with a block's run, or None."""
    output = f"--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-5000:]}"
    if block.fate == "run":
        if result.returncode != 0:
            return f"exited with {result.returncode}\n{output}"
        if "Traceback" in result.stderr:
            return f"ran, but printed a traceback\n{output}"
        return None
    if result.returncode == 0:
        return f"needs the Hub, yet ran offline with exit status 0\n{output}"
    if block.runs_our_command:
        errors = OUR_ERROR.findall(result.stderr)
        first = OUR_ERROR.search(result.stderr)
        # Under `accelerate launch` the launcher adds its own report after our line: not ours to change.
        if len(errors) != 1 or "Traceback" in result.stderr[: first.start()]:
            return f"offline, not one error line of ours before anything else\n{output}"
    return None


@pytest.mark.slow
def test_readme_blocks_run_as_written(tmp_path):
    """The README and the pages walked as a new user would, offline: the main job first, then every block in order."""
    workdir = tmp_path / "repository"
    shutil.copytree(REPOSITORY, workdir, ignore=not_copied, symlinks=True)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(OFFLINE, HF_HOME=str(tmp_path / "hf_home"))

    blocks = [block for block in readme_blocks() if block.language in RUN_LANGUAGES]
    order = sorted(blocks, key=lambda block: not block.is_main_job)  # stable: the rest in the reading order
    table, failures = [], []
    for block in order:
        if block.fate == "not run":
            table.append((block, "not run: " + block.marker[len(NOT_RUN) :], None))
            continue
        started = time.monotonic()
        result = run_block(block, workdir, scripts, env)
        seconds = time.monotonic() - started
        problem = check_block(block, result)
        if block.fate == "run":
            fate = "ran"
        elif block.runs_our_command and problem is None:
            line = result.stderr[OUR_ERROR.search(result.stderr).start() :].splitlines()[0]
            fate = f"needs the Hub: failed offline, one line of ours (exit {result.returncode}): {line[:90]}"
        else:
            fate = f"needs the Hub: failed offline, a library's error (exit {result.returncode})"
        table.append((block, fate if problem is None else "FAILED", seconds))
        if problem:
            failures.append(f"{block.where} ({block.language}): {problem}")

    reading_order = {id(block): index for index, block in enumerate(blocks)}
    report = "\n".join(
        f"{block.where:40} {block.language:6} {'' if seconds is None else f'{seconds:6.1f} s':>8}  {fate}"
        for block, fate, seconds in sorted(table, key=lambda row: reading_order[id(row[0])])
    )
    print(f"The {len(blocks)} bash and python blocks of the README and the pages:\n{report}")
    assert not failures, "\n\n".join(failures) + f"\n\n{report}"
