"""Benchmark of training: FIBER's batched loader against the training step; the Trainer's pushes during training
against none.

    python bench/train.py                      # the sample demo's model and a t5-small-sized one, on the CPU
    python bench/train.py --device cuda        # the same on a GPU (bf16)
    python bench/train.py --hub_push           # train.py's training time with --hub_strategy every_save, checkpoint
    python bench/train.py --quick [--hub_push] # tiny sizes, in seconds (the tests run it)

1. Per setup: ms per batch of `FiberExamples` + `FiberDataCollator` (one Arrow read of the batch's features), of
   the plain way (datasets' NumPy rows, one by one), and of a training step (forward, backward, AdamW) on that batch.
   Goal: the loader at least 5x faster than the step, so that it never starves it.
2. --hub_push: training/train.py on the sample demo, pushing to the tests' local Hub (tests/hub/hub_server.py) at each
   save, against `--hub_strategy end` (one push after training), in alternating runs: the Trainer's `train_runtime`
   (saves included) and the commits each run made. Goal: every_save within 5% of end (its pushes run in the
   background).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from fiberbench.data import load_sample
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.training.trainer import FiberDataCollator, FiberExamples

import quick

REPOSITORY = Path(__file__).resolve().parents[1]
ACCELERATE_CONFIG = REPOSITORY / "training" / "accelerate.yaml"
TRAIN = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ACCELERATE_CONFIG),
         "training/train.py"]
# Model shape (build_tiny_config fields) and batch size of each setup; early fusion on the sample's I3D features.
SETUPS = {
    "sample_demo": (dict(d_model=128, d_ff=256, num_heads=4, d_kv=32), 16),
    "t5_small": (dict(d_model=512, d_ff=2048, d_kv=64, num_heads=8, num_layers=6, num_decoder_layers=6), 16),
}
TINY = dict(d_model=32, d_ff=64, d_kv=8, num_heads=4)
LOADER_GOAL, PUSH_GOAL = 5, 1.05


def milliseconds(function, repeats: int) -> float:
    """The best of `repeats` timings of `function()` after a first call, in ms (the least disturbed by the machine)."""
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return 1000 * best


def measure(setup: str, args) -> dict:
    """ms per batch of the two loaders and of a training step, for `setup`."""
    sizes, batch_size = SETUPS[setup]
    split = load_sample("i3d")["train"]
    processor = FiberProcessor(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH))
    examples, collate = FiberExamples(split, with_video=True), FiberDataCollator(processor)
    rows = split.with_format("numpy")
    indices = list(range(batch_size))
    batched = milliseconds(lambda: collate(examples.__getitems__(indices)), args.repeats)
    def row_by_row():  # what the Trainer does with a datasets.Dataset: one formatted row per example
        chosen = [rows[i] for i in indices]
        captions, labels = [row["masked_caption"] for row in chosen], [row["label"] for row in chosen]
        return processor(captions, video_features=[row["video_features"] for row in chosen], labels=labels)

    row_by_row = milliseconds(row_by_row, args.repeats)
    torch.manual_seed(0)
    config = build_tiny_config(processor.tokenizer, "early", **(TINY if args.quick else sizes))
    model = FiberT5ForConditionalGeneration(config).to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = {key: value.to(args.device) for key, value in collate(examples.__getitems__(indices)).items()}

    def step():
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.device.startswith("cuda")):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    return {"setup": setup, "batch": batch_size, "loader": batched, "rows": row_by_row,
            "step": milliseconds(step, args.repeats)}


def hub_push_runs(strategies: list[str], args) -> dict[str, list[dict]]:
    """train.py pushing to a local Hub, `args.runs` times per strategy, alternating: each run's training seconds
    (the Trainer's `train_runtime`) and commits."""
    sys.path.insert(0, str(REPOSITORY / "tests" / "hub"))
    from hub_server import LocalHub

    runs = {strategy: [] for strategy in strategies}
    with tempfile.TemporaryDirectory(prefix="bench-hub-push-") as folder, LocalHub(Path(folder) / "hub") as hub:
        env = {**os.environ, **hub.client_env(Path(folder) / "client"), "TOKENIZERS_PARALLELISM": "false"}
        env.pop("HF_HUB_OFFLINE", None)
        for repeat in range(args.runs):
            for strategy in strategies[:: 1 if repeat % 2 == 0 else -1]:
                output_dir, repo_id = Path(folder) / f"{strategy}-{repeat}", f"bench/{strategy}-{repeat}"
                flags = ["--num_train_epochs", args.num_train_epochs, "--do_predict", "false", "--output_dir",
                         output_dir, "--push_to_hub", "--hub_model_id", repo_id, "--hub_strategy", strategy]
                subprocess.run([*TRAIN, *map(str, flags)], cwd=REPOSITORY, env=env, check=True, capture_output=True)
                history = json.loads((output_dir / "results.json").read_text())["training"]["log_history"]
                commits = len(hub.store.repos[("model", repo_id)].commits) - 1  # less the repo's initial commit
                runs[strategy].append({"seconds": history[-1]["train_runtime"], "commits": commits})
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (bf16 autocast on CUDA)")
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS))
    parser.add_argument("--repeats", type=int, default=5, help="timings per measurement; the best is kept")
    parser.add_argument("--hub_push", action="store_true", help="Compare train.py's training time across strategies.")
    parser.add_argument("--hub_strategies", nargs="+", default=["end", "every_save", "checkpoint"])
    parser.add_argument("--runs", type=int, default=3, help="train.py runs per strategy, with --hub_push")
    parser.add_argument("--num_train_epochs", type=int, default=4, help="of each train.py run, with --hub_push")
    args = quick.parse_args(parser, repeats=2, hub_strategies=["end", "every_save"], runs=1, num_train_epochs=1)
    if args.hub_push:
        strategies = ["end", *[strategy for strategy in args.hub_strategies if strategy != "end"]]
        runs = hub_push_runs(strategies, args)
        print(f"\ntrain.py, sample demo, {args.num_train_epochs} epochs, pushing to a local Hub ({args.runs} runs)")
        print("| --hub_strategy | training s (median) | steps vs end (paired: median, range) | commits per run |")
        print("|---|---|---|---|")
        for strategy, mine in runs.items():
            ratios = [run["seconds"] / end["seconds"] for run, end in zip(mine, runs["end"])]
            print(f"| {strategy} | {statistics.median(run['seconds'] for run in mine):.2f} | "
                  f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
                  f"{statistics.median(run['commits'] for run in mine):g} |")
        worst = max(statistics.median(run["seconds"] / end["seconds"] for run, end in zip(mine, runs["end"]))
                    for mine in runs.values())
        judged = f"pushes within {PUSH_GOAL - 1:.0%} of end: {'ok' if worst <= PUSH_GOAL else 'SLOWER'}"
        print(quick.verdict(args, judged))
        return
    rows = [measure(setup, args) for setup in args.setups]
    print(f"\nTraining batches ({args.device}, {torch.get_num_threads()} threads; best of {args.repeats})")
    print("| setup | batch | loader ms | row by row ms | step ms | loader speed-up | batched vs rows |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['setup']} | {row['batch']} | {row['loader']:.1f} | {row['rows']:.1f} | {row['step']:.1f} | "
              f"{row['step'] / row['loader']:.1f}x | {row['rows'] / row['loader']:.1f}x |")
    slowest = min(row["step"] / row["loader"] for row in rows)
    judged = f"loader {LOADER_GOAL}x faster than the step: {'ok' if slowest >= LOADER_GOAL else 'MISSED'}"
    print(quick.verdict(args, judged))


if __name__ == "__main__":
    main()
