"""What the benchmarks share: `--quick` (tiny sizes, the same code, seconds: tests/test_benches.py runs it) and timing.

Scripts import it as `quick` (Python puts the script's folder, bench/, first on sys.path).
"""

import argparse
import subprocess
import sys
import time


def parse_args(parser: argparse.ArgumentParser, **quick_defaults) -> argparse.Namespace:
    """`parser`'s arguments and --quick; with --quick, `quick_defaults` are the defaults (a flag given still wins)."""
    parser.add_argument("--quick", action="store_true", help="Tiny sizes, the same code: seconds (the tests run it).")
    if parser.parse_args().quick:
        parser.set_defaults(**quick_defaults)
    return parser.parse_args()


def verdict(args: argparse.Namespace, judged: str) -> str:
    """`judged`, a full run's verdict against the goal; with --quick, that tiny sizes cannot be judged."""
    return "quick run: sizes too small to judge against the goal" if args.quick else judged


def best_seconds(function, repeats: int = 1) -> float:
    """The shortest of `repeats` runs of `function()`, GPU work included: other work slows a run, never speeds one."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        torch = sys.modules.get("torch")  # only a script that imported torch can have started GPU work
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def run(command: list[str]) -> None:
    """`command` in a new process, as a user runs it; its failure ends the benchmark with its error output."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
