"""Benchmark of the command line's start-up: `fiberbench --help` and each subcommand's `--help`.

`fiberbench --help` imports no command (the CLI dispatches to a command's module only when it is named), so it
should cost little more than starting Python; a subcommand's help loads that command's libraries. Each command runs
`--repeats` times in a fresh process; the table shows the best wall time and its ratio to `python -c pass`.
"""

import argparse
import subprocess
import sys
import time

from fiberbench.cli import COMMANDS

import quick


def best_seconds(command: list[str], repeats: int) -> float:
    """The fastest of `repeats` runs of `command` in a fresh process, which must succeed."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        best = min(best, time.perf_counter() - started)
        if result.returncode:
            raise SystemExit(f"{command}: exit status {result.returncode}\n{result.stderr}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Runs per command; the best is kept.")
    args = quick.parse_args(parser, repeats=1)
    baseline = best_seconds([sys.executable, "-c", "pass"], args.repeats)
    rows = [("python -c pass", baseline)]
    for name in ["", *COMMANDS]:
        command = [sys.executable, "-m", "fiberbench.cli", *([name] if name else []), "--help"]
        rows.append((" ".join(["fiberbench", *([name] if name else []), "--help"]), best_seconds(command, args.repeats)))
    width = max(len(name) for name, _ in rows)
    print(f"| {'command'.ljust(width)} | seconds | x python |")
    print(f"|{'-' * (width + 2)}|---------|----------|")
    for name, seconds in rows:
        print(f"| {name.ljust(width)} | {seconds:7.3f} | {seconds / baseline:8.1f} |")


if __name__ == "__main__":
    main()
