"""Benchmark of the leaderboard's submissions: N submissions in a row to a local store, each scored in a child process
and its pairs with the stored systems compared once; per 10 submissions, the mean time to submit, to update the
board and the resident memory, against the first 10 (the goal: flat as the board grows); then the memory before and
after a refused submission (the goal: the same).

Python's multiprocessing runs the calling script's imports again in each child: here this script's, light; in the
Space, app.py's (gradio), about 1.5 s more a submission on 2 CPU cores.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from fiberbench.leaderboard.src.metadata import Refused
from fiberbench.leaderboard.src.populate import Board, LocalStore
from fiberbench.leaderboard.src.submission import submit
from fiberbench.metric.evaluate.predictions import load_split

from fiberbench.outputs import write_jsonl
from fiberbench.records import KEY_FIELDS

SETTINGS = {"confidence_level": 0.95, "num_bootstrap": 1000, "seed": 0}


def resident_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def fields(name: str) -> dict:
    return {"system": name, "link": "https://example.org/system", "kind": "video", "video_input": "frames",
            "frames": "8", "answer_reading": "the reply as it is"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=110, help="How many, in blocks of 10.")
    # Not bench/quick.py's --quick: each child would import its torch again (see above).
    parser.add_argument("--quick", action="store_true", help="20 submissions: seconds (the tests run it).")
    if parser.parse_args().quick:
        parser.set_defaults(submissions=20)
    args = parser.parse_args()
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
            submit(split, SETTINGS, store, path, fields(f"system {number}"), path.name)
            stored = time.perf_counter()
            board.update(*store.read(split.name, ""))
            timings.append((stored - start, time.perf_counter() - stored, resident_mb()))
            if number % 10 == 9:
                submit_s, update_s, memory = np.mean(timings[-10:], axis=0)
                print(f"| {number - 8}-{number + 1} | {submit_s:.3f} | {update_s:.3f} | {memory:.0f} | "
                      f"{submit_s / np.mean(timings[:10], axis=0)[0]:.2f}x |")
        before = resident_mb()
        try:
            submit(split, SETTINGS, store, path, fields("system 0"), path.name)
        except Refused:
            print(f"\nA refused submission (a name taken): resident {before:.1f} MB before, {resident_mb():.1f} after.")


if __name__ == "__main__":
    main()
