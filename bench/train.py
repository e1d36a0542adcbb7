"""Benchmark of training: the data loader, with and without workers, against the step; the paper's run projected;
pushes to the Hub during training against none.

    python bench/train.py                                     # CPU: the sample demo and a t5-small-sized model
    python bench/train.py --device cuda --setups t5_base      # a GPU: the paper's setup (T5-base, batch 64, bf16)
    python bench/train.py --hub_push                          # train.py's step time, --hub_strategy every_save vs end
    python bench/train.py --quick [--hub_push]                # the same at tiny sizes, in seconds (the tests run it)

Each setup runs in its own process started by `accelerate launch`, so its peak memory is its own
and its threads are set as in training. Per setup, on the data and loaders training/train.py uses
(`FiberExamples`, `FiberDataCollator`, `make_dataloader`):
- loader ms/batch: reading and collating batches alone, in the training process (0 workers) and
  in worker processes (as train.py runs by default; pinned memory on CUDA);
- step ms: forward, backward and AdamW on batches already on the device, through Accelerate;
- step+load ms: the two together, serial (0 workers) and overlapped (workers): what a run sees;
- eval ms/batch: the evaluation of one batch of 64 (the sample's 60) as train.py does it (label
  probabilities and `fill_blanks` with the paper's beams; the noun-phrase choice, a spaCy parse on
  the CPU, is left out).
The loader must be at least 5x faster than the step so that it never starves it. The `t5_base`
setup reads synthetic data of FIBER's size (26,000 training clips of 32 I3D features, 1,000
validation clips; written once to --cache_dir) and projects the paper's 10 epochs with a
validation after each and a final evaluation of validation and test.

With --hub_push it runs training/train.py itself (the sample demo, --num_train_epochs 2 unless --max_train_steps,
a checkpoint every 5 steps) with --push_to_hub against the tests' local Hub server (tests/hub/hub_server.py), once per
--hub_strategies value and --repeats times, alternating, and compares the steps' mean wall time
(results.json's `training.step_seconds`) with that of `end`, which pushes only after training.
Goal: `every_save` within 5% of `end`, since its pushes run in the background. Beside it, the time
the run spent saving (`training.save_seconds`: the checkpoints, the same in every strategy, and
what a push needs on the training process: the current weights into `model/` before validation
has chosen a best model, the card, the hard links of the staging folder).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import fiberbench.training
from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG, read_config
from fiberbench.training.launch import ACCELERATE_CONFIG

import quick

# This process only starts the measuring ones (`accelerate launch ... --one_setup`, train.py with --hub_push): the
# libraries that measure (torch, transformers, accelerate, datasets: seconds of CPU) are imported where a setup is
# measured, in the process that measures it.
if TYPE_CHECKING:
    import datasets
    import torch

T5_VOCAB_SIZE = 32128
SAMPLE_DEMO = read_config(SAMPLE_DEMO_CONFIG)
# Model shape (FiberT5Config fields, as --config_overrides spells them), batch size and data; all early fusion.
SETUPS = {
    "sample_demo": (SAMPLE_DEMO["config_overrides"], SAMPLE_DEMO["per_device_train_batch_size"], "sample"),
    "t5_small": (
        f"d_model=512,d_ff=2048,d_kv=64,num_heads=8,num_layers=6,num_decoder_layers=6,vocab_size={T5_VOCAB_SIZE}",
        16,
        "sample",
    ),
    "t5_base": (
        f"d_model=768,d_ff=3072,d_kv=64,num_heads=12,num_layers=12,num_decoder_layers=12,vocab_size={T5_VOCAB_SIZE}",
        64,
        "fiber_size",
    ),
}
FUSION = "early"
EVAL_BATCH = 64
MIN_LOADER_SPEEDUP = 5
# FIBER's size (paper §3.1): about 26,000 training clips; validation and test 1,000 each; T about 32.
FIBER_TRAIN, FIBER_VALIDATION, FIBER_TEST, FIBER_FRAMES, FEATURE_SIZE = 26_000, 1_000, 1_000, 32, 1024
PAPER_EPOCHS = 10
TRAINING_DIR = Path(fiberbench.training.__file__).parent
TRAIN_SCRIPT = TRAINING_DIR / "train.py"
ONE_PROCESS = ["--config_file", str(ACCELERATE_CONFIG)]
HUB_SERVER_DIR = Path(__file__).resolve().parents[1] / "tests" / "hub"
# train.py for the push comparison: the sample demo (25 steps an epoch), a checkpoint every 5 steps.
HUB_PUSH_SETTINGS = ["--checkpointing_steps", "5", "--no-do_predict"]
HUB_PUSH_SETTINGS += ["--dataloader_num_workers", "1"]
HUB_PUSH_GOAL = 1.05
# --quick: every setup shrunk to this (its batch and data kept). T5's vocabulary too: its 32,128 logits per token
# would be most of a tiny model's work (the beam search of the evaluation above all); the sample tokenizer's pieces
# (a few hundred) fit in 512.
TINY_OVERRIDES = "d_model=32,d_ff=64,d_kv=8,num_heads=4,num_layers=1,num_decoder_layers=1,vocab_size=512"


def fiber_size_splits(cache_dir: Path) -> dict[str, datasets.Dataset]:
    """Synthetic train and validation splits of FIBER's size: the sample's captions, random features.

    Written once to an Arrow file in `cache_dir` (about 3.5 GB) and memory-mapped, as a built FIBER is.
    """
    import datasets
    import numpy as np

    from fiberbench.data import load_sample

    sample = load_sample("text")["train"]
    features = datasets.Features(
        {
            "masked_caption": datasets.Value("string"),
            "label": datasets.Value("string"),
            "video_features": datasets.Array2D(shape=(None, FEATURE_SIZE), dtype="float32"),
        }
    )

    def clips(count: int, seed: int):
        generator = np.random.default_rng(seed)
        for index in range(count):
            row = sample[index % len(sample)]
            yield {
                "masked_caption": row["masked_caption"],
                "label": row["label"],
                "video_features": generator.standard_normal((FIBER_FRAMES, FEATURE_SIZE), dtype=np.float32),
            }

    return {
        name: datasets.Dataset.from_generator(
            clips, features=features, gen_kwargs={"count": count, "seed": seed}, cache_dir=str(cache_dir)
        )
        for name, count, seed in (("train", FIBER_TRAIN, 0), ("validation", FIBER_VALIDATION, 1))
    }


def seconds_per_batch(batches, count: int, warmup: int, device: torch.device) -> float:
    """Mean seconds per batch of an iterator over `count` batches after `warmup` (workers started, caches warm)."""
    iterator = iter(batches)
    for _ in range(warmup):
        next(iterator)
    synchronize(device)
    start = time.perf_counter()
    for _ in range(count):
        next(iterator)
    synchronize(device)
    return (time.perf_counter() - start) / count


def measure(setup: str, args: argparse.Namespace) -> dict:
    """Loader, step, overlap and evaluation times of one setup, in this process."""
    import torch
    from accelerate import Accelerator
    from transformers import AutoTokenizer

    from fiberbench.cli import default_num_workers
    from fiberbench.data import load_sample
    from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
    from fiberbench.modeling import build_tiny_config
    from fiberbench.training.evaluation import label_probabilities
    from fiberbench.training.inputs import FiberExamples, make_dataloader

    overrides, batch_size, data = SETUPS[setup]
    on_gpu = args.device == "cuda"
    accelerator = Accelerator(
        cpu=not on_gpu,
        mixed_precision="bf16" if on_gpu and torch.cuda.is_bf16_supported() else "no",
        dynamo_backend="inductor" if args.torch_compile else None,
    )
    device = accelerator.device
    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
    config = build_tiny_config(tokenizer, FUSION)
    config.update_from_string(overrides)
    if args.config_overrides:
        config.update_from_string(args.config_overrides)
    torch.manual_seed(0)
    model = FiberT5ForConditionalGeneration(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0, fused=on_gpu)
    model, optimizer = accelerator.prepare(model, optimizer)
    processor = FiberProcessor(tokenizer)
    splits = fiber_size_splits(Path(args.cache_dir)) if data == "fiber_size" else load_sample("i3d")
    examples = FiberExamples(splits["train"], with_video=True)
    workers = default_num_workers() if args.dataloader_num_workers is None else args.dataloader_num_workers

    def loader(num_workers: int):
        loader = make_dataloader(
            examples,
            batch_size=batch_size,
            shuffle=True,
            seed=0,
            processor=processor,
            num_workers=num_workers,
            pin_memory=on_gpu,
        )
        while True:  # as many epochs as the measurement needs
            yield from loader

    def on_device(batch: dict) -> dict:
        return {key: value.to(device, non_blocking=True) for key, value in batch.items()}

    def step(batch: dict) -> None:
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()

    counted = {"count": args.steps, "warmup": args.warmup, "device": device}
    loader_serial = seconds_per_batch(loader(0), **counted)
    loader_workers = seconds_per_batch(loader(workers), **counted)

    model.train()
    batches = [on_device(batch) for _, batch in zip(range(args.warmup + args.steps), loader(0))]
    step_times = []
    for batch in batches:
        start = time.perf_counter()
        step(batch)
        synchronize(device)
        step_times.append(time.perf_counter() - start)
    # A median of per-step times: this machine may be shared, and a median shrugs off the moments
    # another process takes the cores.
    step_seconds = statistics.median(step_times[args.warmup :])
    serial = seconds_per_batch((step(on_device(batch)) for batch in loader(0)), **counted)
    overlapped = seconds_per_batch((step(on_device(batch)) for batch in loader(workers)), **counted)

    unwrapped = accelerator.unwrap_model(model, keep_torch_compile=False).eval()
    evaluation = FiberExamples(splits["validation"], with_video=True)
    evaluation = evaluation.__getitems__(range(min(EVAL_BATCH, len(evaluation))))
    captions = [example["masked_caption"] for example in evaluation]
    videos = [example["video_features"] for example in evaluation]

    def evaluate_batch() -> None:
        with torch.no_grad(), accelerator.autocast():
            inputs = processor(captions, video_features=videos, labels=[e["label"] for e in evaluation]).to(device)
            label_probabilities(unwrapped(**inputs).logits, inputs["labels"])
        unwrapped.fill_blanks(
            processor, captions, video_features=videos, only_noun_phrases=False, batch_size=EVAL_BATCH
        )

    eval_seconds = seconds_per_batch((evaluate_batch() for _ in itertools.count()), count=2, warmup=1, device=device)
    return {
        "setup": setup,
        "device": torch.cuda.get_device_name() if on_gpu else "cpu",
        "batch": batch_size,
        "train_examples": len(examples),
        "workers": workers,
        "parameters": sum(parameter.numel() for parameter in unwrapped.parameters()),
        "loader_serial_ms": 1000 * loader_serial,
        "loader_workers_ms": 1000 * loader_workers,
        "step_ms": 1000 * step_seconds,
        "serial_ms": 1000 * serial,
        "overlapped_ms": 1000 * overlapped,
        "eval_ms": 1000 * eval_seconds,
        "peak_mb": torch.cuda.max_memory_allocated() / 2**20
        if on_gpu
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


# The table's columns: each a header and how a setup's row shows in it. "loader speed-up" is the step time over the
# loader's with workers.
COLUMNS = {
    "setup": lambda row: row["setup"],
    "device": lambda row: row["device"],
    "batch": lambda row: row["batch"],
    "params": lambda row: f"{row['parameters'] / 1e6:.1f}M",
    "loader ms (0 workers)": lambda row: f"{row['loader_serial_ms']:.1f}",
    "loader ms (workers)": lambda row: f"{row['loader_workers_ms']:.1f} ({row['workers']})",
    "step ms": lambda row: f"{row['step_ms']:.1f}",
    "loader speed-up": lambda row: f"{row['step_ms'] / row['loader_workers_ms']:.1f}x",
    "step+load ms serial": lambda row: f"{row['serial_ms']:.1f}",
    "step+load ms overlapped": lambda row: f"{row['overlapped_ms']:.1f}",
    "train examples/s": lambda row: f"{row['batch'] / row['overlapped_ms'] * 1000:.1f}",
    "eval ms/batch": lambda row: f"{row['eval_ms']:.0f}",
    "peak memory MB": lambda row: f"{row['peak_mb']:.0f}",
}


def format_table(rows: list[dict]) -> str:
    """A Markdown table, one row per setup (`COLUMNS`)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    lines += ["| " + " | ".join(str(cell(row)) for cell in COLUMNS.values()) + " |" for row in rows]
    return "\n".join(lines)


def paper_run_projection(row: dict) -> str:
    """The paper's 10 epochs at this setup's speed, with a validation after each and a final validation and test."""
    steps = PAPER_EPOCHS * math.ceil(FIBER_TRAIN / row["batch"])
    eval_batches = PAPER_EPOCHS * math.ceil(FIBER_VALIDATION / EVAL_BATCH)
    eval_batches += math.ceil(FIBER_VALIDATION / EVAL_BATCH) + math.ceil(FIBER_TEST / EVAL_BATCH)
    training, evaluation = steps * row["overlapped_ms"] / 1000, eval_batches * row["eval_ms"] / 1000
    return (
        f"{row['setup']}: the paper's {PAPER_EPOCHS} epochs ({steps} steps of {row['batch']}) with a validation "
        f"after each and a final validation and test ({eval_batches} evaluation batches of {EVAL_BATCH}): "
        f"{(training + evaluation) / 60:.1f} min here ({training / 60:.1f} training, {evaluation / 60:.1f} "
        f"evaluation; paper: under 1 h on a V100; goal: under 5 min on one H100)"
    )


def run_child(command: list[str], env: dict | None = None) -> str:
    """The standard output of `command`; when it fails, its error output ends this benchmark."""
    completed = subprocess.run(command, capture_output=True, text=True, env=env)
    if completed.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    return completed.stdout


def hub_push_runs(
    strategies: list[str], repeats: int, num_train_epochs: int, max_train_steps: int | None = None
) -> list[dict]:
    """train.py with --push_to_hub to a local Hub, once per strategy and repeat (alternating, so that a busy moment
    of a shared machine falls on all strategies alike): each run's mean step seconds and the commits its pushes made
    (a push that changes nothing, such as the same best model again, makes none)."""
    sys.path.insert(0, str(HUB_SERVER_DIR))
    from hub_server import LocalHub

    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-hub-push-") as folder, LocalHub(Path(folder) / "hub") as hub:
        env = {**os.environ, **hub.client_env(Path(folder) / "client"), "TOKENIZERS_PARALLELISM": "false"}
        env["HF_HUB_OFFLINE"] = "0"  # the local Hub runs on this machine: an offline setting must not stop pushes
        for repeat, strategy in itertools.product(range(repeats), strategies):
            output_dir, repo_id = Path(folder) / f"{strategy}-{repeat}", f"bench/{strategy}-{repeat}"
            command = [sys.executable, "-m", "accelerate.commands.launch", *ONE_PROCESS, str(TRAIN_SCRIPT)]
            command += [*HUB_PUSH_SETTINGS, "--num_train_epochs", str(num_train_epochs)]
            if max_train_steps is not None:
                command += ["--max_train_steps", str(max_train_steps)]
            command += ["--output_dir", str(output_dir)]
            command += ["--push_to_hub", "--hub_model_id", repo_id, "--hub_strategy", strategy]
            run_child(command, env)
            training = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))["training"]
            commits = len(hub.store.repos[("model", repo_id)].commits) - 1  # less the repo's initial commit
            runs.append({**{key: training[key] for key in ("step_seconds", "save_seconds")}, "strategy": strategy})
            runs[-1]["commits"] = commits
    return runs


def paired_ratios(runs: list[dict], strategy: str) -> list[float]:
    """Each repeat's step time of `strategy` over that of `end` in the same repeat (run just before it): a paired
    comparison, which a shared machine's changing load disturbs far less than one of medians."""
    mine = [run["step_seconds"] for run in runs if run["strategy"] == strategy]
    end = [run["step_seconds"] for run in runs if run["strategy"] == "end"]
    return [seconds / baseline for seconds, baseline in zip(mine, end)]


def format_hub_push_table(runs: list[dict], strategies: list[str]) -> str:
    """One row per strategy: its step times, their ratio to `end`'s (median of the paired runs), the time saving,
    commits per run."""
    lines = ["| --hub_strategy | runs | step ms (median) | step ms (each run) | steps vs end (paired: median, range) |"]
    lines[0] += " saving s per run | commits per run |"
    lines.append("|---|---|---|---|---|---|---|")
    for strategy in strategies:
        mine = [run for run in runs if run["strategy"] == strategy]
        each = ", ".join(f"{1000 * run['step_seconds']:.0f}" for run in mine)
        ratios = paired_ratios(runs, strategy)
        lines.append(
            f"| {strategy} | {len(mine)} | {1000 * statistics.median(run['step_seconds'] for run in mine):.1f} | "
            f"{each} | {statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
            f"{statistics.median(run['save_seconds'] for run in mine):.2f} | "
            f"{statistics.median(run['commits'] for run in mine):g} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--setups", nargs="+", choices=tuple(SETUPS), default=["sample_demo", "t5_small"])
    parser.add_argument("--steps", type=int, default=10, help="Timed batches per measurement.")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed batches first.")
    parser.add_argument("--dataloader_num_workers", type=int, default=None, help="Default: as train.py chooses.")
    parser.add_argument("--torch_compile", action="store_true", help="Compile the model (inductor).")
    parser.add_argument(
        "--cache_dir",
        default=str(Path.home() / ".cache" / "fiberbench" / "bench_train"),
        help="Where the t5_base setup's synthetic data of FIBER's size is written once.",
    )
    parser.add_argument("--hub_push", action="store_true", help="Compare train.py's step time across --hub_strategy.")
    parser.add_argument("--hub_strategies", nargs="+", default=["end", "every_save", "checkpoint"])
    parser.add_argument("--repeats", type=int, default=3, help="Runs of train.py per strategy, with --hub_push.")
    parser.add_argument("--num_train_epochs", type=int, default=2, help="Of each train.py run, with --hub_push.")
    parser.add_argument(
        "--max_train_steps", type=int, default=None, help="Of each train.py run, with --hub_push (default: its epochs)."
    )
    parser.add_argument(
        "--config_overrides",
        default=None,
        help="FiberT5Config fields set after each setup's own (e.g. d_model=64,num_layers=2): other sizes.",
    )
    parser.add_argument("--one_setup", help=argparse.SUPPRESS)
    args = quick.parse_args(
        parser, steps=2, warmup=1, config_overrides=TINY_OVERRIDES, hub_strategies=["end", "every_save"], repeats=1,
        num_train_epochs=1, max_train_steps=10,
    )
    if args.one_setup:
        print(json.dumps(measure(args.one_setup, args)))
        return 0
    if args.hub_push:
        strategies = ["end", *[strategy for strategy in args.hub_strategies if strategy != "end"]]
        runs = hub_push_runs(strategies, args.repeats, args.num_train_epochs, args.max_train_steps)
        print(format_hub_push_table(runs, strategies))
        for strategy in strategies[1:]:
            ratio = statistics.median(paired_ratios(runs, strategy))
            verdict = quick.verdict(
                args, "ok" if ratio <= HUB_PUSH_GOAL else f"SLOWER than the goal ({HUB_PUSH_GOAL:.2f})"
            )
            print(f"{strategy}: steps {ratio:.3f}x those of end (pushes in the background): {verdict}")
        return 0

    rows = []
    for setup in args.setups:
        # Through `accelerate launch`, as training runs: it sets the threads per process
        # (OMP_NUM_THREADS=1 unless set), and a plain `python` on a busy CPU can be far slower.
        command = [sys.executable, "-m", "accelerate.commands.launch", *ONE_PROCESS, __file__, "--one_setup", setup]
        command += ["--device", args.device, "--steps", str(args.steps), "--warmup", str(args.warmup)]
        command += ["--cache_dir", args.cache_dir] + (["--torch_compile"] if args.torch_compile else [])
        if args.dataloader_num_workers is not None:
            command += ["--dataloader_num_workers", str(args.dataloader_num_workers)]
        if args.config_overrides:
            command += ["--config_overrides", args.config_overrides]
        output = run_child(command)
        rows.append(json.loads(output.strip().splitlines()[-1]))
    print(format_table(rows))
    for row in rows:
        speedup = row["step_ms"] / row["loader_workers_ms"]
        starves = f"TOO SLOW: the loader would starve the step (< {MIN_LOADER_SPEEDUP}x)"
        verdict = quick.verdict(args, "ok" if speedup >= MIN_LOADER_SPEEDUP else starves)
        print(f"{row['setup']}: loader with {row['workers']} workers {speedup:.1f}x faster than the step: {verdict}")
        if row["setup"] == "t5_base":
            print(paper_run_projection(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
