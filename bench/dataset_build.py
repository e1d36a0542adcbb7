"""Benchmark of `fiberbench build-dataset` (clips/s, peak memory vs clip count) and of reading the `i3d` config.

Generates release-format data with the sample generator (T = 32 frames per clip), builds it in a
fresh process per size (its peak resident memory), then reads the built `i3d` config into torch
tensors in batches and compares with one `np.load` per `.npy` file. Linux only (/proc).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from datasets import load_dataset

from fiberbench.data.fiber.make_sample import make_sample
from fiberbench.records import feature_file_name

import quick

# The build runs in a child process so that its peak is the build's alone. The peak is the child's
# VmHWM: `resource.getrusage(...).ru_maxrss` survives fork + exec on Linux, so a child would report
# at least the (large, torch-importing) parent's resident size.
PEAK_RSS_MB = 'int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024'
BUILD_IN_CHILD = f"""
import json, sys, time
from fiberbench.cli import main
start = time.perf_counter()
exit_code = main(["build-dataset", "--data_dir", sys.argv[1], "--features_dir", sys.argv[1] + "/i3d",
                  "--output_dir", sys.argv[2]])
seconds = time.perf_counter() - start
print(json.dumps({{"exit_code": exit_code, "seconds": seconds, "peak_rss_mb": {PEAK_RSS_MB}}}))
"""
IMPORT_IN_CHILD = f"""
import json
import fiberbench.data.build
print(json.dumps({{"peak_rss_mb": {PEAK_RSS_MB}}}))
"""


def run_child(code: str, *args: str) -> dict:
    completed = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def split_sizes(num_clips: int) -> dict[str, int]:
    """`num_clips` split 80/10/10 into train/val/test."""
    held_out = num_clips // 10
    return {"train": num_clips - 2 * held_out, "val": held_out, "test": held_out}


def read_batched(folder: Path, batch_size: int, cache_dir: Path, via_numpy: bool) -> tuple[int, float]:
    """Rows and seconds reading the built `i3d` train split into torch tensors, `batch_size` rows at a time.

    `via_numpy`: batches in the "numpy" format, made tensors with `torch.from_numpy`; otherwise the
    "torch" format. The one-off Parquet-to-Arrow conversion of `load_dataset` is not timed:
    training reads the cached Arrow files every epoch.
    """
    dataset = load_dataset(str(folder), "i3d", split="train", cache_dir=str(cache_dir))
    dataset = dataset.with_format("numpy" if via_numpy else "torch", columns=["video_features"])
    start = time.perf_counter()
    rows = 0
    for batch in dataset.iter(batch_size=batch_size):
        features = torch.from_numpy(batch["video_features"]) if via_numpy else batch["video_features"]
        rows += len(features)
    return rows, time.perf_counter() - start


def read_npy_files(data_dir: Path) -> tuple[int, float]:
    """Rows and seconds loading the same clips with one `np.load` per file, each made a torch tensor."""
    records = json.loads((data_dir / "train.json").read_text())
    paths = [
        data_dir / "i3d" / feature_file_name(r["video_id"], r["video_start_time"], r["video_end_time"]) for r in records
    ]
    start = time.perf_counter()
    for path in paths:
        torch.from_numpy(np.load(path)[0])
    return len(paths), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000], help="Clip counts to build.")
    parser.add_argument("--batch_size", type=int, default=32, help="Rows per batch when reading the i3d config.")
    args = quick.parse_args(parser, sizes=[20], batch_size=8)

    baseline = run_child(IMPORT_IN_CHILD)["peak_rss_mb"]
    builds, reads = [], []
    with tempfile.TemporaryDirectory() as work:
        for num_clips in args.sizes:
            data_dir, output_dir = Path(work) / f"data-{num_clips}", Path(work) / f"fiber-{num_clips}"
            make_sample(data_dir, clips_per_split=split_sizes(num_clips), frame_range=(32, 32))
            build = run_child(BUILD_IN_CHILD, str(data_dir), str(output_dir))
            if build["exit_code"] != 0:
                raise SystemExit(f"build-dataset failed on {num_clips:,} clips: {build}")
            builds.append((num_clips, build))
            cache_dir = Path(work) / "cache"
            reads.append(
                (
                    num_clips,
                    read_batched(output_dir, args.batch_size, cache_dir, via_numpy=True),
                    read_batched(output_dir, args.batch_size, cache_dir, via_numpy=False),
                    read_npy_files(data_dir),
                )
            )

    print(f"build-dataset (configs text + i3d, T = 32); peak RSS of a process that only imports it: {baseline:.0f} MB")
    print(f"| clips | seconds | clips/s | peak RSS (MB) | peak RSS / {builds[0][0]:,}-clip peak |")
    print("|---:|---:|---:|---:|---:|")
    for num_clips, build in builds:
        ratio = build["peak_rss_mb"] / builds[0][1]["peak_rss_mb"]
        print(
            f"| {num_clips:,} | {build['seconds']:.1f} | {num_clips / build['seconds']:.0f} | "
            f"{build['peak_rss_mb']:.0f} | {ratio:.2f} |"
        )
    print()
    print(f"reading the i3d train split into torch tensors, batches of {args.batch_size}, vs one np.load per file")
    print("| clips | numpy-format batches rows/s | torch-format batches rows/s | np.load rows/s "
          "| numpy-format / np.load | torch-format / np.load |")
    print("|---:|---:|---:|---:|---:|---:|")
    for num_clips, *timings in reads:
        via_numpy, via_torch, per_file = (rows / seconds for rows, seconds in timings)
        print(
            f"| {num_clips:,} | {via_numpy:,.0f} | {via_torch:,.0f} | {per_file:,.0f} "
            f"| {via_numpy / per_file:.2f} | {via_torch / per_file:.2f} |"
        )


if __name__ == "__main__":
    main()
