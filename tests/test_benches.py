"""The benchmarks run: every bench/ script's `--quick` mode (tiny sizes, the same code) exits 0 and prints its tables.

Their figures are not checked (a speed is for the notes, never an assertion); what is: each table the
script prints, its header and a row under it whose ratio column holds a number. Each script runs as
`python bench/SCRIPT.py --quick` runs it from the repository root, offline, but in the test's process: what a
bench times it starts in processes of its own, and its own start-up (imports of torch and transformers) is no
part of what the test checks.
"""

import re
import runpy
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# A ratio cell: "1.00x", "0.25", "1.000 (1.00-1.00)", "9.2 ".
RATIO = re.compile(r"-?\d[\d,]*(\.\d+)?x?( |$)")
# What a full run says against its goal (a verdict or a target), and what a quick run says instead.
VERDICT = re.compile(r": ok$|target:|TOO SLOW|MISSED|SLOWER", re.MULTILINE)
NOT_JUDGED = "quick run: sizes too small to judge against the goal"


def run_quick(script: str, monkeypatch, capsys, *flags: str) -> str:
    """The standard output of `python bench/SCRIPT --quick FLAGS` run in this process (`runpy`, as `__main__`, with
    bench/ first on sys.path as Python puts a script's folder), which must end with no error."""
    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    monkeypatch.setattr(sys, "argv", [str(Path("bench") / script), "--quick", *flags])
    for name, value in {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
        monkeypatch.setenv(name, value)  # for the processes the bench starts
    capsys.readouterr()
    try:
        runpy.run_path(str(REPO / "bench" / script), run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            pytest.fail(f"bench/{script} --quick exited {exit_.code}:\n{capsys.readouterr().err[-4000:]}")
    return capsys.readouterr().out


def table(output: str, column: str) -> list[dict[str, str]]:
    """The rows, as {header: cell}, of the first Markdown table in `output` with a column headed `column`."""
    lines = output.splitlines()
    starts = [index for index, line in enumerate(lines) if column in cells(line)]
    assert starts, f"no table with a column {column!r} in:\n{output}"
    header = cells(lines[starts[0]])
    assert lines[starts[0] + 1].startswith("|-"), f"no separator under {header}"
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        assert len(cells(line)) == len(header), f"a row of {len(cells(line))} cells under {header}: {line}"
        rows.append(dict(zip(header, cells(line))))
    assert rows, f"the table headed {header} has no rows"
    return rows


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []


def check_ratios(rows: list[dict[str, str]], column: str) -> None:
    """At least one row holds a number in `column` (a row may hold "–" or nothing where nothing compares)."""
    assert any(RATIO.match(row[column]) for row in rows), [row[column] for row in rows]


def check_tables(output: str, ratio_columns: list[str]) -> None:
    for column in ratio_columns:
        check_ratios(table(output, column), column)


def check_not_judged(output: str) -> None:
    """Tiny sizes say nothing about the goal: a quick run gives no verdict or target, it says it cannot judge."""
    assert NOT_JUDGED in output, output
    assert not VERDICT.search(output), VERDICT.search(output)


# Each script and the ratio columns of its tables.
RATIO_COLUMNS = {
    "blank.py": ["vs 1 process"],
    "cli.py": ["x python"],
    "dataset_build.py": ["numpy format / np.load"],
    "leaderboard.py": ["submit vs first 10"],
    "metric.py": ["speed vs (c)"],
    "replies.py": ["time vs baseline"],
    "scoring.py": ["evaluate / loop"],
    "predict.py": ["batched vs one at a time", "images / video tokens"],
    "features.py": ["encode / overlapped time"],
}
# These need the video environment (torchvision for the video LLMs, PyAV to write and decode clips).
VIDEO_BENCHES = ("predict.py", "features.py")
# Those whose full run judges its figures against a goal.
JUDGED_BENCHES = ("metric.py", "scoring.py", "features.py")
MARKS = {script: pytest.mark.video if script in VIDEO_BENCHES else pytest.mark.slow for script in RATIO_COLUMNS}


@pytest.mark.parametrize("script", [pytest.param(script, marks=mark) for script, mark in MARKS.items()])
def test_bench_runs_quick(script, tmp_path, monkeypatch, capsys):
    # features.py writes its synthetic clips once to a cache folder: a fresh one here, not the user's.
    flags = ["--cache_dir", str(tmp_path)] if script == "features.py" else []
    output = run_quick(script, monkeypatch, capsys, *flags)
    check_tables(output, RATIO_COLUMNS[script])
    if script in JUDGED_BENCHES:
        check_not_judged(output)


@pytest.mark.slow
def test_train_bench_runs_quick_on_the_default_setups(monkeypatch, capsys):
    output = run_quick("train.py", monkeypatch, capsys)
    rows = table(output, "step vs T5")
    assert [row["setup"] for row in rows] == ["sample_demo", "paper"]
    for column in ("rows / loader", "step / loader", "step vs T5"):
        check_ratios(rows, column)
    check_not_judged(output)
