"""Benchmark of the command line's start-up: `--help` of every subcommand, and the refusal of a missing input.

A subcommand imports its heavy libraries (torch, transformers, datasets, spaCy) only when it runs,
and only once its inputs are known to be there, so its help and a mistyped path should cost little
more than starting Python. Each command is run `--repeats` times in a fresh process; the tables
show the best wall time and its ratio to `python -c pass`.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fiberbench.cli import COMMANDS
from fiberbench.data import SAMPLE_DIR

import quick

TRAIN_SCRIPT = Path(__file__).resolve().parents[1] / "training" / "train.py"
# Each command refusing an input that is not there (run in a temporary folder; outputs go there too).
MISSING_INPUTS = {
    "fiberbench evaluate": ["evaluate", "nope.jsonl"],
    "fiberbench agreement": ["agreement", "nope.json"],
    "fiberbench blank": ["blank", "nope.json", "--output_file", "blanked.json"],
    "fiberbench answers": [
        "answers", "--blanked_files", str(SAMPLE_DIR / "val.json"), "--answers_files", "nope.csv",
        "--output_dir", "out",
    ],
    "fiberbench stats": ["stats", "nope.json", "--output_dir", "stats"],
    "fiberbench hit-inputs": ["hit-inputs", "nope.json", "--output_file", "hits.csv"],
    "fiberbench predict": ["predict", "--model_name_or_path", "./nope", "--output_file", "predictions.jsonl"],
}
TRAIN_MISSING_INPUTS = {
    "train.py --config": ["--config", "nope.yaml"],
    "train.py --resume_from_checkpoint": ["--resume_from_checkpoint", "nope/step_1"],
    "train.py --dataset_name": ["--dataset_name", "./nope"],
    "train.py --model_name_or_path": ["--model_name_or_path", "./nope"],
}


def best_seconds(command: list[str], repeats: int, refused: bool = False, cwd: str | None = None) -> float:
    """The fastest of `repeats` runs of `command` in a fresh process (it must succeed, or fail when `refused`)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
        best = min(best, time.perf_counter() - started)
        if (result.returncode != 0) != refused:
            raise SystemExit(f"{command}: exit status {result.returncode}\n{result.stderr}")
    return best


def print_table(rows: list[tuple[str, float]], baseline: float) -> None:
    width = max(len(name) for name, _ in rows)
    print(f"| {'command'.ljust(width)} | seconds | x python |")
    print(f"|{'-' * (width + 2)}|---------|----------|")
    for name, seconds in rows:
        print(f"| {name.ljust(width)} | {seconds:7.3f} | {seconds / baseline:8.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Runs per command; the best is kept.")
    args = quick.parse_args(parser, repeats=1)

    baseline = best_seconds([sys.executable, "-c", "pass"], args.repeats)
    rows = [("python -c pass", baseline)]
    rows.append(("fiberbench --help", best_seconds([sys.executable, "-m", "fiberbench.cli", "--help"], args.repeats)))
    for name in COMMANDS:
        command = [sys.executable, "-m", "fiberbench.cli", name, "--help"]
        rows.append((f"fiberbench {name} --help", best_seconds(command, args.repeats)))

    print_table(rows, baseline)

    refusals = [("python -c pass", baseline)]
    with tempfile.TemporaryDirectory() as folder:
        for name, arguments in MISSING_INPUTS.items():
            command = [sys.executable, "-m", "fiberbench.cli", *arguments]
            refusals.append((f"{name}, a missing input", best_seconds(command, args.repeats, refused=True, cwd=folder)))
        for name, arguments in TRAIN_MISSING_INPUTS.items():
            command = [sys.executable, str(TRAIN_SCRIPT), *arguments, "--output_dir", "run"]
            refusals.append((f"{name}, missing", best_seconds(command, args.repeats, refused=True, cwd=folder)))
    print()
    print_table(refusals, baseline)


if __name__ == "__main__":
    main()
