"""Benchmark of `fiberbench build-dataset` (clips per second) and of reading the built `i3d` config in batches.

Generates release-format data with the sample generator (T = 32 features per clip), builds it as a
user does (`fiberbench build-dataset` in a new process), then reads the `i3d` train split into torch
tensors in batches, against one `np.load` per `.npy` file (the release's layout).

    python bench/dataset_build.py [--sizes 1000 5000] [--batch_size 32]
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
from fiberbench.records import clip_key, feature_file_name

import quick


def read_batched(folder: Path, batch_size: int, cache_dir: Path, via_numpy: bool) -> float:
    """Rows a second reading the built `i3d` train split into torch tensors, `batch_size` rows at a time, in the
    "numpy" format (made tensors with `torch.from_numpy`) or the "torch" format (the one-off Arrow conversion of
    `load_dataset` is not timed: training reads the cached Arrow files every epoch)."""
    dataset = load_dataset(str(folder), "i3d", split="train", cache_dir=str(cache_dir))
    dataset = dataset.with_format("numpy" if via_numpy else "torch", columns=["video_features"])
    start, rows = time.perf_counter(), 0
    for batch in dataset.iter(batch_size=batch_size):
        rows += len(torch.from_numpy(batch["video_features"]) if via_numpy else batch["video_features"])
    return rows / (time.perf_counter() - start)


def read_npy_files(data_dir: Path) -> float:
    """Rows a second loading the same clips with one `np.load` per file, each made a torch tensor."""
    records = json.loads((data_dir / "train.json").read_text())
    start = time.perf_counter()
    for record in records:
        torch.from_numpy(np.load(data_dir / "i3d" / feature_file_name(*clip_key(record)))[0])
    return len(records) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000], help="Clip counts to build.")
    parser.add_argument("--batch_size", type=int, default=32, help="Rows per batch when reading the i3d config.")
    args = quick.parse_args(parser, sizes=[20], batch_size=8)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for clips in args.sizes:
            data_dir, output_dir = Path(work) / f"data-{clips}", Path(work) / f"fiber-{clips}"
            held_out = clips // 10
            sizes = {"train": clips - 2 * held_out, "val": held_out, "test": held_out}
            make_sample(data_dir, clips_per_split=sizes, frame_range=(32, 32))
            command = [sys.executable, "-m", "fiberbench.cli", "build-dataset", "--data_dir", str(data_dir)]
            command += ["--features_dir", str(data_dir / "i3d"), "--output_dir", str(output_dir)]
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            seconds = time.perf_counter() - start
            cache = Path(work) / "cache"
            reads = [read_batched(output_dir, args.batch_size, cache, via) for via in (True, False)]
            rows.append((clips, seconds, *reads, read_npy_files(data_dir)))
    print("build-dataset (configs text + i3d, T = 32), then reading the i3d train split in batches of", args.batch_size)
    print("| clips | build seconds | clips/s | numpy-format rows/s | torch-format rows/s | np.load rows/s "
          "| numpy-format / np.load | torch-format / np.load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for clips, seconds, via_numpy, via_torch, per_file in rows:
        print(f"| {clips:,} | {seconds:.1f} | {clips / seconds:.0f} | {via_numpy:,.0f} | {via_torch:,.0f} | "
              f"{per_file:,.0f} | {via_numpy / per_file:.2f} | {via_torch / per_file:.2f} |")


if __name__ == "__main__":
    main()
