"""Benchmark of the command line's start-up: `fiberbench --help` and each subcommand's `--help`, against Python's own.

`fiberbench --help` imports no command (the CLI imports a command's module only when it is named), so it should
cost little more than starting Python; a subcommand's help loads that command's libraries. Each runs --repeats
times in a new process; the table gives the best wall time and its ratio to `python -c pass`.
"""

import argparse
import sys

from fiberbench.cli import COMMANDS

import quick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Runs per command; the best is kept.")
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS),
                        help="The subcommands whose --help is timed (default: all).")
    args = quick.parse_args(parser, repeats=1, commands=["build-dataset", "evaluate"])  # two of the light ones
    commands = {"python -c pass": [sys.executable, "-c", "pass"]}
    for words in [[], *([name] for name in args.commands)]:
        commands[" ".join(["fiberbench", *words, "--help"])] = [sys.executable, "-m", "fiberbench.cli", *words,
                                                                 "--help"]
    print("| command | seconds | x python |\n|---|---|---|")
    baseline = None
    for label, command in commands.items():
        seconds = quick.best_seconds(lambda: quick.run(command), args.repeats)
        baseline = baseline or seconds
        print(f"| {label} | {seconds:.3f} | {seconds / baseline:.1f} |")


if __name__ == "__main__":
    main()
