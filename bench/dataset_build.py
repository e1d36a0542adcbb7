"""Benchmark of `fiberbench build-dataset` (clips/s), and of reading the built `i3d` config against the `.npy` files.

Generates release-format data with the sample generator (--clips clips of 32 I3D features), builds it as a user does
(`fiberbench build-dataset` in a new process), then reads the `i3d` train split into torch tensors, --batch_size rows
at a time in datasets' numpy format, each batch made a tensor with `torch.from_numpy` (the one-off Arrow conversion of
`load_dataset` not timed: training reads the cached Arrow files every epoch), against one `np.load` per `.npy` file,
the release's layout. Reads are the best of 3.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from datasets import load_dataset

from fiberbench.data.fiber.make_sample import make_sample

import quick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=2000, help="Clips to generate and build (a tenth each held out).")
    parser.add_argument("--batch_size", type=int, default=32, help="Rows per batch when reading the i3d config.")
    args = quick.parse_args(parser, clips=20, batch_size=8)
    with tempfile.TemporaryDirectory() as work:
        data_dir, output_dir = Path(work) / "data", Path(work) / "fiber"
        make_sample(data_dir, {"train": args.clips - 2 * (args.clips // 10), "val": args.clips // 10,
                               "test": args.clips // 10}, frame_range=(32, 32))
        build = quick.best_seconds(lambda: quick.run([
            sys.executable, "-m", "fiberbench.cli", "build-dataset", "--data_dir", str(data_dir),
            "--features_dir", str(data_dir / "i3d"), "--output_dir", str(output_dir)]))
        split = load_dataset(str(output_dir), "i3d", split="train", cache_dir=str(Path(work) / "cache"))
        split = split.with_format("numpy", columns=["video_features"])
        arrow = len(split) / quick.best_seconds(lambda: [torch.from_numpy(batch["video_features"])
                                                         for batch in split.iter(batch_size=args.batch_size)], 3)
        files = sorted((data_dir / "i3d").glob("*.npy"))  # every split's: rows per second are the same
        npy = len(files) / quick.best_seconds(lambda: [torch.from_numpy(np.load(file)[0]) for file in files], 3)
    print(f"build-dataset (configs text + i3d, T = 32), then the i3d train split read in batches of {args.batch_size}")
    print("| clips | build seconds | clips/s | numpy-format rows/s | np.load rows/s | numpy format / np.load |\n"
          "|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.clips:,} | {build:.1f} | {args.clips / build:.0f} | {arrow:,.0f} | {npy:,.0f} | {arrow / npy:.2f} |")


if __name__ == "__main__":
    main()
