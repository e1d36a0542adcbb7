"""Benchmark of `fiberbench evaluate`: the metric's bootstrap and randomization against a per-resample loop, and the
whole command at 1,000 and 100,000 blanks.

For 5 systems on N blanks with every pairwise comparison: (a) the metric's functions
(`confidence_interval` of the 5 systems, `compare_systems` of the 10 pairs: a paired bootstrap
and an approximate randomization test), which draw a column of few distinct scores as value counts
(Multinomial(blanks, frequencies), Binomial(count, 1/2) swaps), and (b) the same statistics
computed the straightforward way, one resample (and one randomization trial) at a time, blank by
blank, in a Python loop. Both draw from the same distributions, so their intervals agree within
Monte Carlo error (the largest gap is given in standard errors of the mean), and so do the p-values.

Then `fiberbench evaluate` end to end in a new process (imports and all): 5 predictions files with
3 ranked candidates each, --with_baselines, the default statistics (10,000 resamples), and the same
with 1 resample, on a built dataset whose test split has N blanks with FIBER's shape (9 annotators of
1 to 3 answers, 8 categories); wall and CPU seconds (of the command and the helper process that
draws its plot) and peak resident memory (the command's plus its helper's), against the goals: 10 s
of CPU and 1 GB for 100,000 blanks, and 3 s for a cold command on 1,000 blanks (the median of 5
runs). The machine's load is printed: on a shared machine the wall time is the CPU time stretched
by it.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from fiberbench.data import SAMPLE_DIR
from fiberbench.metric import compare_systems, confidence_interval

import quick

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


def differences_of_pairs(scores: np.ndarray) -> np.ndarray:
    """Per blank, the difference of the scores of each pair of systems: (blanks, pairs)."""
    return np.stack([scores[:, i] - scores[:, j] for i, j in combinations(range(NUM_SYSTEMS), 2)], axis=1)


def loop(scores: np.ndarray, num_bootstrap: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same statistics, one resample and one randomization trial at a time."""
    num_blanks = len(scores)
    pairs = list(combinations(range(NUM_SYSTEMS), 2))
    differences = differences_of_pairs(scores)
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


ANSWER_WORDS = (
    "man woman boy girl child dog cat ball guitar piano drum kitchen room house street mountain cliff "
    "river water balloon rope car bike hat shirt table chair stage crowd camera phone knife bowl cake"
).split()
CATEGORIES = ("Person", "Passive entity", "Location", "Pronoun", "Body part", "Event", "Audio", "Other")
# The child prints its peak resident memory (VmHWM) last, plus the largest peak of its own children (the process
# drawing the plot), which may run beside it: at most their peak together. `getrusage` of the child here would also
# count the resident size of this process, which it inherits across fork + exec.
EVALUATE_IN_CHILD = """
import resource
import sys
from fiberbench.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exit_:  # --help
    status = exit_.code
own = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
print((own + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024)
sys.exit(status)
"""


def crowd_answer(rng: random.Random) -> str:
    """A one- or two-word noun phrase with the articles and case crowd answers have."""
    words = " ".join(rng.choice(ANSWER_WORDS) for _ in range(rng.randint(1, 2)))
    return rng.choice(("", "a ", "the ", "A ")) + words


def make_dataset(folder: Path, num_blanks: int, seed: int) -> tuple[Path, list[dict]]:
    """A built dataset whose test split has `num_blanks` blanks as in FIBER (9 annotators of 1 to 3 answers,
    8 categories), and its test records; train and validation are the sample's."""
    rng = random.Random(seed)
    sample = {name: json.loads((SAMPLE_DIR / f"{name}.json").read_text()) for name in ("train", "val", "test")}
    data_dir = folder / "release"
    data_dir.mkdir()
    (data_dir / "train.json").write_text(json.dumps(sample["train"]))
    (data_dir / "val.json").write_text(json.dumps(sample["val"]))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    test = []
    for _ in range(num_blanks):
        label = crowd_answer(rng)
        test.append(
            {
                "video_id": "".join(rng.choice(alphabet) for _ in range(11)),
                "video_start_time": 10,
                "video_end_time": 20,
                "masked_caption": "A man shows _____ to the camera.",
                "label": label,
                "additional_answers": [[crowd_answer(rng) for _ in range(rng.randint(1, 3))] for _ in range(9)],
            }
        )
    (data_dir / "test.json").write_text(json.dumps(test))
    categories = ["video_id\tcategory"] + [f"{record['video_id']}\t{rng.choice(CATEGORIES)}" for record in test]
    (data_dir / "categories_test.tsv").write_text("\n".join(categories) + "\n")
    build = [sys.executable, "-m", "fiberbench.cli", "build-dataset", "--data_dir", str(data_dir)]
    subprocess.run([*build, "--output_dir", str(folder / "fiber")], check=True, capture_output=True)
    return folder / "fiber", test


def write_systems(folder: Path, test: list[dict], seed: int) -> list[Path]:
    """5 predictions files of different skill, each with 3 ranked candidates per blank."""
    rng = random.Random(seed)
    files = []
    for system in range(NUM_SYSTEMS):
        rows = []
        for record in test:
            answers = [answer for annotator in record["additional_answers"] for answer in annotator]
            right = rng.random() < 0.3 + 0.08 * system
            prediction = rng.choice(answers) if right else crowd_answer(rng)
            candidates = [prediction, crowd_answer(rng), rng.choice(answers)]
            keys = {field: record[field] for field in ("video_id", "video_start_time", "video_end_time")}
            rows.append({**keys, "prediction": prediction, "candidates": candidates})
        files.append(folder / f"system_{system}.jsonl")
        files[-1].write_text("".join(json.dumps(row) + "\n" for row in rows))
    return files


def run_evaluate(arguments: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak resident MB of `fiberbench evaluate ARGUMENTS` in a new process (imports
    and all)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", EVALUATE_IN_CHILD, "evaluate", *arguments], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode:
        raise SystemExit(f"fiberbench evaluate failed:\n{completed.stderr[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, float(completed.stdout.strip().splitlines()[-1])


def end_to_end(
    num_blanks: int, num_bootstrap: int, seed: int, work_dir: Path | None, cold_runs: int
) -> list[tuple[str, float, float, float]]:
    """(run, wall seconds, CPU seconds, peak MB) of `fiberbench evaluate` on `num_blanks` test blanks: 5 systems with
    --with_baselines at `num_bootstrap` resamples (the median of `cold_runs` runs by wall time), the same with 1
    resample, and `--help`.

    The dataset and predictions are made in `work_dir/NUM_BLANKS` (a temporary folder when None) and
    used again from there by a later run (to time other code on the same data).
    """
    with tempfile.TemporaryDirectory() as temporary:
        folder = (work_dir or Path(temporary)) / str(num_blanks)
        files = [folder / f"system_{system}.jsonl" for system in range(NUM_SYSTEMS)]
        if not all(path.is_file() for path in files):
            folder.mkdir(parents=True)
            dataset, test = make_dataset(folder, num_blanks, seed)
            files = write_systems(folder, test, seed)
        arguments = [*map(str, files), "--dataset_name", str(folder / "fiber"), "--with_baselines"]
        runs = []
        for resamples, repeats in ((num_bootstrap, cold_runs), (1, 1)):
            output = ["--output_dir", temporary + f"/out_{resamples}", "--overwrite_output_dir"]
            timed = sorted(run_evaluate([*arguments, "--num_bootstrap", str(resamples), *output]) for _ in range(repeats))
            shown = f"5 systems + baselines, {resamples:,} resamples" + (f", median of {repeats}" if repeats > 1 else "")
            runs.append((shown, *timed[len(timed) // 2]))
        runs.append(("--help", *run_evaluate(["--help"])))
        return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_blanks", type=int, nargs="*", default=[1000, 100_000])
    parser.add_argument("--num_bootstrap", type=int, default=10_000, help="Resamples and trials (at most).")
    parser.add_argument(
        "--max_draws",
        type=int,
        default=10**8,
        help="Fewer resamples for many blanks: resamples x blanks at most this (the loop would take an hour).",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--end_to_end_blanks", type=int, nargs="*", default=[1000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold_runs", type=int, default=5, help="Runs of the whole command whose median is shown.")
    parser.add_argument(
        "--work_dir", type=Path, help="Keep the end-to-end datasets and predictions here, and use them again if there."
    )
    # 1,000 resamples at the least: the agreement check below is set for their Monte Carlo error.
    args = quick.parse_args(
        parser, num_blanks=[1000], num_bootstrap=1000, repeats=1, end_to_end_blanks=[200], cold_runs=1
    )

    print(
        f"{NUM_SYSTEMS} systems and their 10 pairs; best of {args.repeats} runs (the loop on 100,000 blanks: 1 run); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        "| blanks | resamples | (a) the metric, s | (b) loop, s | (b) / (a) | largest interval gap, standard errors "
        "| largest p gap |"
    )
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
        # Standard errors of the means (of each system, and of each pair's difference).
        errors = np.concatenate([scores.std(axis=0), differences_of_pairs(scores).std(axis=0)]) / np.sqrt(num_blanks)
        gaps = np.abs(np.concatenate([intervals_a - intervals_b, differences_a - differences_b])) / errors[:, None]
        print(
            f"| {num_blanks:,} | {resamples:,} | {seconds_a:.3f} | {seconds_b:.3f} | {seconds_b / seconds_a:.1f}x | "
            f"{gaps.max():.2f} | {np.abs(p_a - p_b).max():.4f} |",
            flush=True,
        )
        if gaps.max() > 0.5:  # about 4 Monte Carlo errors of a 2.5% quantile of 1,000 resamples
            raise SystemExit("the metric's and the looped bootstrap disagree beyond Monte Carlo error")

    print(f"\n`fiberbench evaluate` end to end, a new process each (load average {os.getloadavg()[0]:.1f})")
    print("| test blanks | run | wall s | CPU s | peak MB | wall / 10 s | CPU / 10 s | peak / 1 GB |")
    print("|---|---|---|---|---|---|---|---|")
    measured = {}
    for num_blanks in args.end_to_end_blanks:
        runs = end_to_end(num_blanks, args.num_bootstrap, args.seed, args.work_dir, args.cold_runs)
        for run, seconds, cpu, peak in runs:
            print(
                f"| {num_blanks:,} | {run} | {seconds:.2f} | {cpu:.2f} | {peak:.0f} | {seconds / 10:.2f} | "
                f"{cpu / 10:.2f} | {peak / 1024:.2f} |",
                flush=True,
            )
        measured[num_blanks] = runs[0][1:]
    print_goals(args, measured)


# The goals: at 100,000 blanks (the largest run), CPU seconds and peak memory; at 1,000 (the smallest), the wall
# time of a cold command (median of `--cold_runs`).
GOALS = (("largest", "CPU s", 1, 10.0), ("largest", "peak MB", 2, 1024.0), ("smallest", "cold wall s", 0, 3.0))


def print_goals(args: argparse.Namespace, measured: dict[int, tuple[float, float, float]]) -> None:
    """The measured figures against the goals, as ratios (below 1: met), with a verdict (none on a quick run)."""
    print(f"\nGoals of `fiberbench evaluate`, 5 systems + baselines, {args.num_bootstrap:,} resamples (load average "
          f"{os.getloadavg()[0]:.1f}; the wall time is the CPU time stretched by the load)")
    print("| blanks | figure | measured | goal | measured / goal | verdict |")
    print("|---|---|---|---|---|---|")
    for which, figure, index, goal in GOALS:
        num_blanks = (max if which == "largest" else min)(measured)
        value = measured[num_blanks][index]
        judged = "met" if value <= goal else "missed"
        print(f"| {num_blanks:,} | {figure} | {value:.2f} | {goal:g} | {value / goal:.2f} | {quick.verdict(args, judged)} |")


if __name__ == "__main__":
    sys.exit(main())
