"""The examples of README.md and of the documentation's pages, run as written: every bash and python block,
offline, from a copy of the repository root after the main job, each document's blocks in order; a block marked as
needing the Hub is checked to fail offline, and a block marked as not run says why.

A user reads the README, then the pages in the order of mkdocs.yml's `nav`, in one folder. Here each document with
blocks to run is a test of its own, so that pytest-xdist spreads them, and its blocks run in a walk of their own
(tests/readme_walks.py, built once per test run: the tests that read what a block made read the same walk), started
from a copy of the folder as the documents before it leave it where that matters: after the main job (run first),
and for the pages after "The dataset" after that page's blocks too (its `fiber` is the dataset they read). That no
document reads what another wrote, these two aside, shows when it runs: its block fails. That none changes what it
started from, nor makes a path that another makes (the later would meet the earlier's), each document's test checks
on its walk (the Hugging Face home, a cache, aside)."""

import json
import re
from pathlib import Path

import pytest

from .built_once import run_folder
from .readme_walks import (
    DOCS,
    MAIN_JOB,
    NOT_RUN,
    README,
    REPOSITORY,
    RUN_LANGUAGES,
    Block,
    Run,
    after_main_job,
    blocks_to_run,
    document_walk,
    documents,
    kept_runs,
    kept_writes,
    main_job_block,
    readme_blocks,
    runnable_blocks,
    states,
    walk_blocks,
    writes,
)

# Every fenced block of the README and the pages, by language: a new block changes these counts, and the table that
# test_readme_blocks_run_as_written prints for its document (one with blocks to run) says what became of it (run,
# checked to fail offline, or not run).
EXPECTED_BLOCKS = {"bash": 36, "python": 8, "json": 2, "bibtex": 1}
EXPECTED_FATES = {"run": 19, "needs the Hub": 8, "not run": 17}

# One line of ours, as the CLI and train.py print a user error (tests/conftest.py's `user_error`).
OUR_ERROR = re.compile(r"^(fiberbench [\w-]+|train\.py): error: ", re.MULTILINE)


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
    if not block.runs_our_command and "offline" not in "\n".join(run.stderr.splitlines()[-5:]).lower():
        return f"needs the Hub, yet stopped offline at something else than the Hub (a library's last lines)\n{output}"
    if block.runs_our_command:
        errors = OUR_ERROR.findall(run.stderr)
        first = OUR_ERROR.search(run.stderr)
        # Under `accelerate launch` the launcher adds its own report after our line: not ours to change.
        if len(errors) != 1 or "Traceback" in run.stderr[: first.start()]:
            return f"offline, not one error line of ours before anything else\n{output}"
    return None


@pytest.mark.parametrize("last_line, problem", [
    ("OSError: ... see how to run the library in offline mode at ...", None),
    ("ModuleNotFoundError: No module named 'fiberbench.old_name'", "stopped offline at something else than the Hub"),
], ids=["at the Hub", "before it"])
def test_a_block_that_needs_the_hub_must_stop_at_the_hub(last_line, problem):
    block = Block(README, 1, "python", "# needs the Hugging Face Hub\nfrom fiberbench.old_name import load\n")
    found = check_block(block, Run(1, "", f"Traceback (most recent call last):\n{last_line}\n", 1.0, 1.0))
    assert found is None if problem is None else problem in found


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
def test_readme_blocks_run_as_written(document, tmp_path_factory):
    """A document's blocks walked as a new user would, offline, in order: after the main job, and for the pages after
    "The dataset" after that page's blocks; neither changing what they started from nor making what another made."""
    blocks = runnable_blocks(document)
    main_job = zip([main_job_block()], kept_runs(after_main_job(tmp_path_factory)))
    walk = document_walk(tmp_path_factory, document)
    runs = {block.line: run for block, run in main_job if block.path == document}
    runs |= {block.line: run for block, run in zip(walk_blocks(document), kept_runs(walk))}
    done = kept_writes(walk)

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
