"""The benchmarks' quick mode: `--quick` runs a benchmark's own code at tiny sizes, in seconds (tests/test_benches.py).

Each script names its tiny sizes; they replace the script's defaults, so a flag given beside
--quick still wins. The figures of a quick run say nothing: it only shows that the benchmark runs
and prints its table. Scripts import this module as `quick` (Python puts the script's folder,
bench/, first on sys.path).
"""

import argparse

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
