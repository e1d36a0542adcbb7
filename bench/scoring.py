"""Benchmark of `fiberbench evaluate` at FIBER's size, against a plain SQuAD-style loop, in time and memory.

(a) The loop (`LOOP`): 25 lines in a new process that read the split's release file and 5 predictions files and
score EM and F1 blank by blank (normalize, then the best over the answers), as SQuAD's evaluation script does; its EM
and F1 must equal evaluate's. (b) `fiberbench evaluate` of the same 5 systems (3 ranked candidates each) with
--with_baselines and 10,000 resamples: label-only scores, Correct@K and MAP, intervals, paired tests, human
agreement, results.md and the chart, in a new process (imports and all). Both on a built dataset whose test split has
N blanks shaped like FIBER's (9 annotators of 1 to 3 answers, 8 categories): wall and CPU seconds (median of
--cold_runs) and peak resident memory. The goals: (b) within 3 s of wall time at 1,000 blanks (FIBER's test split),
and memory that grows linearly with the blanks (the MB per 1,000 more blanks is printed for both).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quick

from fiberbench.data import SAMPLE_DIR

NUM_SYSTEMS = 5
WORDS = "man woman boy girl dog cat ball guitar piano kitchen room house street mountain river water rope car".split()
CATEGORIES = ("Person", "Passive entity", "Location", "Pronoun", "Body part", "Event", "Audio", "Other")
LOOP = '''
import json, re, string, sys
ARTICLE_OR_PUNCTUATION = re.compile(r"\\b(?:a|an|the)\\b|[" + re.escape(string.punctuation) + "]")
def normalize(text):  # the release's: articles and punctuation deleted in one pass
    return " ".join(ARTICLE_OR_PUNCTUATION.sub("", text.lower()).split())
def f1(prediction, answer):
    tokens, other = set(normalize(prediction).split()), set(normalize(answer).split())
    if not tokens or not other:
        return float(tokens == other)
    common = len(tokens & other)
    return 2 * common / (len(tokens) + len(other))
blanks = json.load(open(sys.argv[1]))
answers = {(b["video_id"], b["video_start_time"], b["video_end_time"]):
           [b["label"]] + [a for annotator in b["additional_answers"] for a in annotator] for b in blanks}
scores = {}
for path in sys.argv[2:]:
    em = f1s = 0.0
    for line in open(path):
        row = json.loads(line)
        correct = answers[row["video_id"], row["video_start_time"], row["video_end_time"]]
        em += max(normalize(row["prediction"]) == normalize(answer) for answer in correct)
        f1s += max(f1(row["prediction"], answer) for answer in correct)
    scores[path] = [100 * em / len(blanks), 100 * f1s / len(blanks)]
print(json.dumps(scores))
'''
# Runs a command (the loop, or `fiberbench evaluate`) and prints its peak resident memory (VmHWM, in MB) last.
MEASURED = """
import sys
try:
    if sys.argv[1] == "--loop":
        code, sys.argv = sys.argv[2], ["loop", *sys.argv[3:]]
        exec(compile(code, "loop", "exec"), {"__name__": "__main__"})
        status = 0
    else:
        from fiberbench.cli import main
        status = main(sys.argv[1:])
finally:
    print(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024)
sys.exit(status)
"""


def crowd_answer(rng: random.Random) -> str:
    return rng.choice(("", "a ", "the ", "A ")) + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 2)))


def make_inputs(folder: Path, num_blanks: int, seed: int) -> tuple[Path, Path, list[Path]]:
    """A built dataset whose test split has `num_blanks` FIBER-like blanks, its release file and 5 predictions files."""
    rng, release = random.Random(seed), folder / "release"
    release.mkdir(parents=True)
    for name in ("train.json", "val.json"):
        (release / name).write_text((SAMPLE_DIR / name).read_text())
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    test = [{"video_id": "".join(rng.choice(alphabet) for _ in range(11)), "video_start_time": 10, "video_end_time": 20,
             "masked_caption": "A man shows _____ to the camera.", "label": crowd_answer(rng),
             "additional_answers": [[crowd_answer(rng) for _ in range(rng.randint(1, 3))] for _ in range(9)]}
            for _ in range(num_blanks)]
    (release / "test.json").write_text(json.dumps(test))
    categories = [f"{blank['video_id']}\t{rng.choice(CATEGORIES)}" for blank in test]
    (release / "categories_test.tsv").write_text("\n".join(["video_id\tcategory", *categories]) + "\n")
    build = [sys.executable, "-m", "fiberbench.cli", "build-dataset", "--data_dir", str(release)]
    subprocess.run([*build, "--output_dir", str(folder / "fiber")], check=True, capture_output=True)
    files = []
    for system in range(NUM_SYSTEMS):
        rows = []
        for blank in test:
            answers = [answer for annotator in blank["additional_answers"] for answer in annotator]
            prediction = rng.choice(answers) if rng.random() < 0.3 + 0.08 * system else crowd_answer(rng)
            keys = {field: blank[field] for field in ("video_id", "video_start_time", "video_end_time")}
            candidates = [prediction, crowd_answer(rng), rng.choice(answers)]
            rows.append({**keys, "prediction": prediction, "candidates": candidates})
        files.append(folder / f"system_{system}.jsonl")
        files[-1].write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder / "fiber", release / "test.json", files


def measured(arguments: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak MB and standard output of `arguments` run by `MEASURED` in a new process."""
    start, before = time.perf_counter(), os.times()
    done = subprocess.run([sys.executable, "-c", MEASURED, *arguments], capture_output=True, text=True)
    seconds, after = time.perf_counter() - start, os.times()
    if done.returncode:
        raise SystemExit(f"{arguments[0]} failed:\n{done.stderr[-3000:]}")
    *output, peak = done.stdout.strip().splitlines()
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return seconds, cpu, float(peak), "\n".join(output)


def median_run(arguments: list[str], runs: int) -> tuple[float, float, float, str]:
    return sorted(measured(arguments) for _ in range(runs))[runs // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_blanks", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--num_bootstrap", type=int, default=10_000, help="Resamples and randomization trials.")
    parser.add_argument("--cold_runs", type=int, default=5, help="Runs of each command whose median is shown.")
    parser.add_argument("--seed", type=int, default=0)
    args = quick.parse_args(parser, num_blanks=[200, 400], num_bootstrap=1000, cold_runs=1)
    print(f"5 systems, a new process each, median of {args.cold_runs}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print("| blanks | (a) loop wall s | (b) evaluate wall s | evaluate CPU s | evaluate / loop | (a) peak MB "
          "| (b) peak MB |")
    print("|---|---|---|---|---|---|---|")
    peaks, walls = {}, {}
    with tempfile.TemporaryDirectory() as temporary:
        for num_blanks in args.num_blanks:
            dataset, release, files = make_inputs(Path(temporary) / str(num_blanks), num_blanks, args.seed)
            loop = median_run(["--loop", LOOP, str(release), *map(str, files)], args.cold_runs)
            output = Path(temporary) / f"out_{num_blanks}"
            evaluate = median_run(["evaluate", *map(str, files), "--dataset_name", str(dataset), "--with_baselines",
                                   "--num_bootstrap", str(args.num_bootstrap), "--output_dir", str(output),
                                   "--overwrite_output_dir"], args.cold_runs)
            results = json.loads((output / "results.json").read_text())["systems"]
            plain = json.loads(loop[3])
            for path in files:
                ours = results[path.stem]
                theirs = [round(score, 9) for score in plain[str(path)]]
                if [round(ours["exact_match"], 9), round(ours["f1"], 9)] != theirs:
                    raise SystemExit(f"the loop and evaluate disagree on {path.name}: {plain[str(path)]} vs {ours}")
            peaks[num_blanks], walls[num_blanks] = (loop[2], evaluate[2]), evaluate[0]
            print(f"| {num_blanks:,} | {loop[0]:.2f} | {evaluate[0]:.2f} | {evaluate[1]:.2f} | "
                  f"{evaluate[0] / loop[0]:.1f}x | {loop[2]:.0f} | {evaluate[2]:.0f} |", flush=True)
    smallest, largest = min(peaks), max(peaks)
    growth = [(peaks[largest][side] - peaks[smallest][side]) / (largest - smallest) * 1000 for side in (0, 1)]
    print(f"\nMemory per 1,000 more blanks ({smallest:,} to {largest:,}): loop {growth[0]:.1f} MB, evaluate "
          f"{growth[1]:.1f} MB")
    judged = f"{walls[1000]:.2f} s, {'met' if walls[1000] <= 3 else 'missed'}" if 1000 in walls else "not run at 1,000"
    print(f"Goal: evaluate of 5 systems x 1,000 blanks in a new process within 3 s: {quick.verdict(args, judged)}")


if __name__ == "__main__":
    sys.exit(main())
