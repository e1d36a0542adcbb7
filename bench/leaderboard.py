"""Benchmark of the leaderboard: N submissions in a row to a local store; per 10, the mean time to submit (scored in a
child process), to update the board (each new pair compared once) and the resident memory, against the first 10 (the
goal: flat); then the memory around a refused submission (the goal: the same). Each child runs the calling script's
imports again (Python's multiprocessing): here this script's, light; in the Space, app.py's gradio, about 1.5 s.
"""

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import quick

from fiberbench.leaderboard.src.metadata import Refused
from fiberbench.leaderboard.src.populate import Board, LocalStore
from fiberbench.leaderboard.src.submission import submit
from fiberbench.metric.evaluate.predictions import load_split
from fiberbench.outputs import write_jsonl
from fiberbench.records import KEY_FIELDS

SETTINGS = {"confidence_level": 0.95, "num_bootstrap": 1000, "seed": 0}
FIELDS = {"link": "https://example.org", "kind": "video", "video_input": "frames", "frames": "8", "answer_reading": "as is"}


def resident_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=110, help="How many, in blocks of 10.")
    args = quick.parse_args(parser, submissions=20)
    split, rng = load_split(None, "text", "test"), np.random.default_rng(0)
    blanks = [dict(zip(KEY_FIELDS, key)) for key in split.keys]
    print("| submissions | submit (s) | board update (s) | resident MB | submit vs first 10 |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        store, board, timings = LocalStore(Path(folder) / "store"), Board(split, SETTINGS), []
        for number in range(args.submissions):
            right = set(rng.choice(len(blanks), size=len(blanks) // 2, replace=False).tolist())
            path = Path(folder) / f"system_{number}.jsonl"
            write_jsonl(path, [{**blank, "prediction": split.labels[index] if index in right else "a thing"}
                               for index, blank in enumerate(blanks)])
            start = time.perf_counter()
            submit(split, SETTINGS, store, path, {**FIELDS, "system": f"system {number}"}, path.name)
            stored = time.perf_counter()
            board.update(*store.read(split.name, ""))
            timings.append((stored - start, time.perf_counter() - stored, resident_mb()))
            if number % 10 == 9:
                submit_s, update_s, memory = np.mean(timings[-10:], axis=0)
                print(f"| {number - 8}-{number + 1} | {submit_s:.3f} | {update_s:.3f} | {memory:.0f} | "
                      f"{submit_s / np.mean(timings[:10], axis=0)[0]:.2f}x |")
        before = resident_mb()
        with contextlib.suppress(Refused):  # its name is taken
            submit(split, SETTINGS, store, path, {**FIELDS, "system": "system 0"}, path.name)
            raise SystemExit("a submission under a name taken was not refused")
        print(f"\nA refused submission: resident {before:.1f} MB before, {resident_mb():.1f} after.")


if __name__ == "__main__":
    main()
