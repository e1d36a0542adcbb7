"""The benchmarks' quick mode: `--quick` runs a benchmark's own code at tiny sizes, in seconds (tests/test_benches.py).

Each script names its tiny sizes; they replace the script's defaults, so a flag given beside
--quick still wins. The figures of a quick run say nothing: it only shows that the benchmark runs
and prints its table, so where a full run judges its figures against the benchmark's goal, a quick
run says it cannot (`verdict`). Scripts import this module as `quick` (Python puts the script's
folder, bench/, first on sys.path).
"""

import argparse

# What a quick run prints where a full run gives its verdict (or its target) against the goal.
TOO_SMALL_TO_JUDGE = "quick run: sizes too small to judge against the goal"
HELP = "Tiny sizes and few rounds, the same code: seconds, to check that the benchmark runs (the tests run it)."


def parse_args(parser: argparse.ArgumentParser, **quick_defaults) -> argparse.Namespace:
    """`parser`'s arguments with a --quick flag added; with --quick, `quick_defaults` are the defaults."""
    parser.add_argument("--quick", action="store_true", help=HELP)
    args = parser.parse_args()
    unknown = sorted(name for name in quick_defaults if not hasattr(args, name))
    if unknown:
        raise ValueError(f"quick sizes for arguments the parser does not have: {unknown}")
    if not args.quick:
        return args
    parser.set_defaults(**quick_defaults)
    return parser.parse_args()


def verdict(args: argparse.Namespace, judged: str) -> str:
    """`judged`, a full run's verdict against the goal; with --quick, TOO_SMALL_TO_JUDGE (tiny sizes tell nothing)."""
    return TOO_SMALL_TO_JUDGE if args.quick else judged
