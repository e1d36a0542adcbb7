"""The benchmarks run: every bench/ script's `--quick` mode (tiny sizes, the same code) exits 0 and prints its tables.

Their figures are not checked (a speed is for the notes, never an assertion); what is: each table the
script prints, its header and a row under it whose ratio column holds a number. Each script runs
as a user runs it, `python bench/SCRIPT.py --quick` from the repository root, offline.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# A ratio cell: "1.00x", "0.25", "1.000 (1.00-1.00)", "9.2 ".
RATIO = re.compile(r"-?\d[\d,]*(\.\d+)?x?( |$)")
# What a full run says against its goal (a verdict or a target), and what a quick run says instead.
VERDICT = re.compile(r": ok$|target:|TOO SLOW|MISSED|SLOWER", re.MULTILINE)
NOT_JUDGED = "quick run: sizes too small to judge against the goal"


def run_quick(script: str, *flags: str) -> str:
    """The standard output of `python bench/SCRIPT --quick FLAGS`, which must exit 0."""
    command = [sys.executable, str(Path("bench") / script), "--quick", *flags]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-4000:]}"
    return result.stdout


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
def test_bench_runs_quick(script, tmp_path):
    # features.py writes its synthetic clips once to a cache folder: a fresh one here, not the user's.
    flags = ["--cache_dir", str(tmp_path)] if script == "features.py" else []
    output = run_quick(script, *flags)
    check_tables(output, RATIO_COLUMNS[script])
    if script in JUDGED_BENCHES:
        check_not_judged(output)


@pytest.mark.slow
def test_train_bench_runs_quick_on_the_default_setups():
    output = run_quick("train.py")
    rows = table(output, "step vs T5")
    assert [row["setup"] for row in rows] == ["sample_demo", "paper"]
    for column in ("rows / loader", "step / loader", "step vs T5"):
        check_ratios(rows, column)
    check_not_judged(output)
