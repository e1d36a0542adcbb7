"""Benchmark of a command's loading: its imports, with Python's cyclic garbage collector as it is and held off.

Each command loads its libraries (torch, transformers, datasets, spaCy) inside
`fiberbench.collector.collector_held_off()`, which holds the collector off and then freezes what
was built (see that module). Each row imports modules in a fresh process that then exits, as a
command's process does, both ways, `--repeats` times, alternating; the table shows the least CPU
time (user + system) of each and their ratio.
"""

import argparse
import resource
import subprocess
import sys

import quick

# What each row imports: train.py's run, what loading any transformers model imports, blank's parser processes.
DEFAULT_IMPORTS = ["fiberbench.training.train", "transformers.modeling_utils", "spacy"]
HELD_OFF = "from fiberbench.collector import collector_held_off\nwith collector_held_off():\n    import {module}\n"


def cpu_seconds(code: str) -> float:
    """The CPU time (user + system) of `python -c code` in a fresh process, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise SystemExit(f"python -c {code!r}: exit status {result.returncode}\n{result.stderr}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", nargs="+", default=DEFAULT_IMPORTS, help="Modules, one row each.")
    parser.add_argument("--repeats", type=int, default=5, help="Runs of each, alternating; the least is kept.")
    args = quick.parse_args(parser, imports=["json"], repeats=1)

    print(f"CPU seconds of `python -c 'import MODULE'`, least of {args.repeats} fresh processes each")
    print("| import | collector as it is | held off, then frozen | held off / as it is |")
    print("|---|---|---|---|")
    for module in args.imports:
        as_it_is, held_off = [], []
        for _ in range(args.repeats):
            as_it_is.append(cpu_seconds(f"import {module}"))
            held_off.append(cpu_seconds(HELD_OFF.format(module=module)))
        print(f"| {module} | {min(as_it_is):.2f} | {min(held_off):.2f} | {min(held_off) / min(as_it_is):.2f}x |")


if __name__ == "__main__":
    main()
