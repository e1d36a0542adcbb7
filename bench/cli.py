"""Benchmark of the command line's start-up: `fiberbench SUB --help` for every subcommand, against a bare Python.

A subcommand imports its heavy libraries (torch, transformers, datasets, spaCy) only when it runs,
so its help should cost little more than starting Python. Each command is run `--repeats` times
in a fresh process; the table shows the best wall time and its ratio to `python -c pass`.
"""

import argparse
import subprocess
import sys
import time

from fiberbench.cli import COMMANDS


def best_seconds(command: list[str], repeats: int) -> float:
    """The fastest of `repeats` runs of `command` in a fresh process (it must succeed)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Runs per command; the best is kept.")
    args = parser.parse_args()

    baseline = best_seconds([sys.executable, "-c", "pass"], args.repeats)
    rows = [("python -c pass", baseline)]
    rows.append(("fiberbench --help", best_seconds([sys.executable, "-m", "fiberbench.cli", "--help"], args.repeats)))
    for name in COMMANDS:
        command = [sys.executable, "-m", "fiberbench.cli", name, "--help"]
        rows.append((f"fiberbench {name} --help", best_seconds(command, args.repeats)))

    width = max(len(name) for name, _ in rows)
    print(f"| {'command'.ljust(width)} | seconds | x python |")
    print(f"|{'-' * (width + 2)}|---------|----------|")
    for name, seconds in rows:
        print(f"| {name.ljust(width)} | {seconds:7.3f} | {seconds / baseline:8.1f} |")


if __name__ == "__main__":
    main()
