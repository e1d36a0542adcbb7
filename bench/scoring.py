"""Benchmark of `fiberbench evaluate`: numpy-vectorized bootstrap and randomization against a per-resample loop.

For 5 systems on N blanks with every pairwise comparison: (a) the metric's functions
(`confidence_interval` of the 5 systems, `compare_systems` of the 10 pairs: a paired bootstrap
and an approximate randomization test) and (b) the same statistics computed the straightforward
way, one resample (and one randomization trial) at a time in a Python loop. Both bootstraps draw
the same resamples (same seed), so their intervals must agree; the randomization p-values agree
within Monte Carlo error. Then the whole command, end to end, on a built dataset of 1,000 test
blanks with 5 predictions files.
"""

import argparse
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from fiberbench import cli
from fiberbench.data import SAMPLE_DIR
from fiberbench.metric import compare_systems, confidence_interval

NUM_SYSTEMS = 5


def system_scores(num_blanks: int, seed: int) -> np.ndarray:
    """Per-blank F1-like scores (percent) of 5 systems of different skill: (blanks, systems)."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.4, 0.7, NUM_SYSTEMS)
    matches = rng.random((num_blanks, NUM_SYSTEMS)) < skill
    return np.where(matches, 100.0, rng.choice([0.0, 50.0, 200 / 3], size=(num_blanks, NUM_SYSTEMS)))


def vectorized(scores: np.ndarray, num_bootstrap: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = list(combinations(range(NUM_SYSTEMS), 2))
    intervals = confidence_interval(scores, 0.95, num_bootstrap, seed)
    a, b = scores[:, [i for i, _ in pairs]], scores[:, [j for _, j in pairs]]
    comparisons = compare_systems(a, b, 0.95, num_bootstrap, num_bootstrap, seed)
    differences = np.array([comparison["difference_ci"] for comparison in comparisons])
    return intervals, differences, np.array([comparison["p_value"] for comparison in comparisons])


def loop(scores: np.ndarray, num_bootstrap: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same statistics, one resample and one randomization trial at a time."""
    num_blanks = len(scores)
    pairs = list(combinations(range(NUM_SYSTEMS), 2))
    differences = np.stack([scores[:, i] - scores[:, j] for i, j in pairs], axis=1)
    rng = np.random.default_rng(seed)
    means = np.empty((num_bootstrap, NUM_SYSTEMS))
    for resample in range(num_bootstrap):
        means[resample] = scores[rng.integers(0, num_blanks, num_blanks)].mean(axis=0)
    rng = np.random.default_rng(seed)
    difference_means = np.empty((num_bootstrap, len(pairs)))
    for resample in range(num_bootstrap):
        difference_means[resample] = differences[rng.integers(0, num_blanks, num_blanks)].mean(axis=0)
    observed = np.abs(differences.sum(axis=0))
    rng = np.random.default_rng(seed)
    at_least = np.zeros(len(pairs))
    for _ in range(num_bootstrap):
        signs = np.where(rng.random(num_blanks) < 0.5, -1.0, 1.0)
        at_least += np.abs(signs @ differences) >= observed - 1e-9
    quantiles = [0.025, 0.975]
    return (
        np.quantile(means, quantiles, axis=0).T,
        np.quantile(difference_means, quantiles, axis=0).T,
        (at_least + 1) / (num_bootstrap + 1),
    )


def best_seconds(function, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def make_dataset(folder: Path, num_blanks: int, seed: int) -> Path:
    """A release-format dataset (the sample's train split; val and test of `num_blanks` blanks), built."""
    rng = random.Random(seed)
    sample = {name: json.loads((SAMPLE_DIR / f"{name}.json").read_text()) for name in ("train", "val", "test")}
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    data_dir = folder / "release"
    data_dir.mkdir()
    (data_dir / "train.json").write_text(json.dumps(sample["train"]))
    for name in ("val", "test"):
        records = [
            {**rng.choice(sample["test"]), "video_id": "".join(rng.choice(alphabet) for _ in range(11))}
            for _ in range(num_blanks)
        ]
        (data_dir / f"{name}.json").write_text(json.dumps(records))
        categories = ["video_id\tcategory"] + [
            f"{r['video_id']}\t{rng.choice(['Person', 'Object', 'Place'])}" for r in records
        ]
        (data_dir / f"categories_{name}.tsv").write_text("\n".join(categories) + "\n")
    subprocess.run(
        ["fiberbench", "build-dataset", "--data_dir", str(data_dir), "--output_dir", str(folder / "fiber")],
        check=True,
        capture_output=True,
    )
    return folder / "fiber"


def end_to_end(num_blanks: int, num_bootstrap: int, seed: int) -> dict[str, float]:
    """Seconds of `fiberbench evaluate` for 5 systems with --with_baselines (a new process: imports and all;
    in this process, warm), and of `fiberbench evaluate --help`."""
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        dataset = make_dataset(folder, num_blanks, seed)
        test = json.loads((folder / "release" / "test.json").read_text())
        rng = random.Random(seed)
        files = []
        for system in range(NUM_SYSTEMS):
            rows = [
                {
                    "video_id": record["video_id"],
                    "video_start_time": record["video_start_time"],
                    "video_end_time": record["video_end_time"],
                    "prediction": record["label"] if rng.random() < 0.4 + 0.05 * system else "a man",
                    "candidates": [record["label"], "a man", "a woman"],
                }
                for record in test
            ]
            files.append(folder / f"system_{system}.jsonl")
            files[-1].write_text("".join(json.dumps(row) + "\n" for row in rows))
        command = ["fiberbench", "evaluate", *map(str, files), "--dataset_name", str(dataset), "--with_baselines"]
        command += ["--num_bootstrap", str(num_bootstrap), "--output_dir", str(folder / "out")]
        seconds = {}
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        seconds["a new process"] = time.perf_counter() - start
        # The same in this process, twice: the second run's imports and dataset cache are warm.
        for _ in range(2):
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert cli.main([*command[1:], "--overwrite_output_dir"]) == 0
            seconds["in this process, warm"] = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(["fiberbench", "evaluate", "--help"], check=True, capture_output=True)
        seconds["--help, a new process"] = time.perf_counter() - start
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_blanks", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--num_bootstrap", type=int, default=10_000, help="Resamples and trials (at most).")
    parser.add_argument(
        "--max_draws",
        type=int,
        default=10**8,
        help="Fewer resamples for many blanks: resamples x blanks at most this (the loop would take an hour).",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(
        f"{NUM_SYSTEMS} systems and their 10 pairs; best of {args.repeats} runs (the loop on 100,000 blanks: 1 run); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print("| blanks | resamples | (a) vectorized, s | (b) loop, s | (b) / (a) | intervals agree | largest p gap |")
    print("|---|---|---|---|---|---|---|")
    for num_blanks in args.num_blanks:
        scores = system_scores(num_blanks, args.seed)
        resamples = min(args.num_bootstrap, max(1, args.max_draws // num_blanks))
        seconds_a, (intervals_a, differences_a, p_a) = best_seconds(
            lambda: vectorized(scores, resamples, args.seed), args.repeats
        )
        loop_repeats = args.repeats if num_blanks * resamples <= 10**7 else 1  # the loop on 100,000 blanks: once
        seconds_b, (intervals_b, differences_b, p_b) = best_seconds(
            lambda: loop(scores, resamples, args.seed), loop_repeats
        )
        agree = np.allclose(intervals_a, intervals_b, rtol=1e-9) and np.allclose(
            differences_a, differences_b, rtol=1e-9
        )
        print(
            f"| {num_blanks:,} | {resamples:,} | {seconds_a:.3f} | {seconds_b:.3f} | {seconds_b / seconds_a:.1f}x | "
            f"{'yes' if agree else 'NO'} | {np.abs(p_a - p_b).max():.4f} |"
        )
        if not agree:
            raise SystemExit("the vectorized and the looped bootstrap disagree")

    print(f"\n`fiberbench evaluate`: 5 files of 1,000 blanks, --with_baselines, {args.num_bootstrap:,} resamples")
    print("| run | seconds |\n|---|---|")
    for run, seconds in end_to_end(1000, args.num_bootstrap, args.seed).items():
        print(f"| {run} | {seconds:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
