"""Benchmark of training: examples/s and peak memory of a training step, against the data loader alone.

    python bench/train.py                                     # CPU: the sample demo and a t5-small-sized model
    python bench/train.py --device cuda --setups t5_base      # a GPU: the paper's setup (T5-base, batch 64, bf16)

Each setup runs in its own process started by `accelerate launch`, so its peak memory is its own
and its threads are set as in training. Times are medians over batches. The loader is timed alone
(reading and collating batches of the bundled sample's i3d config) and the step alone (forward,
backward and Adam on batches already in memory, through Accelerate as in training/train.py);
the loader must be at least 5x faster than the step so that it never starves it.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from itertools import cycle

import torch
from accelerate import Accelerator
from transformers import AutoTokenizer

from fiberbench.data import load_sample
from fiberbench.modeling import (
    SAMPLE_TOKENIZER_PATH,
    FiberProcessor,
    FiberT5ForConditionalGeneration,
    build_tiny_config,
)
from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG, read_config
from fiberbench.training.inputs import make_dataloader

T5_VOCAB_SIZE = 32128
SAMPLE_DEMO = read_config(SAMPLE_DEMO_CONFIG)
# Model shape (FiberT5Config fields, as --config_overrides spells them) and batch size; every setup is early fusion.
SETUPS = {
    "sample_demo": (SAMPLE_DEMO["config_overrides"], SAMPLE_DEMO["per_device_train_batch_size"]),
    "t5_small": (
        f"d_model=512,d_ff=2048,d_kv=64,num_heads=8,num_layers=6,num_decoder_layers=6,vocab_size={T5_VOCAB_SIZE}",
        16,
    ),
    "t5_base": (
        f"d_model=768,d_ff=3072,d_kv=64,num_heads=12,num_layers=12,num_decoder_layers=12,vocab_size={T5_VOCAB_SIZE}",
        64,
    ),
}
FUSION = "early"
MIN_LOADER_SPEEDUP = 5
ONE_PROCESS = ["--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
# The paper's full training (App. B.1): 10 epochs of about 400 steps of 64 examples.
PAPER_STEPS, PAPER_BATCH = 4000, 64


def measure(setup: str, device: str, steps: int, warmup: int) -> dict:
    """Time the loader alone and the training step alone for one setup, in this process."""
    overrides, batch_size = SETUPS[setup]
    accelerator = Accelerator(cpu=device == "cpu", mixed_precision="bf16" if device == "cuda" else "no")
    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
    config = build_tiny_config(tokenizer, FUSION)
    config.update_from_string(overrides)
    torch.manual_seed(0)
    model = FiberT5ForConditionalGeneration(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    model, optimizer = accelerator.prepare(model, optimizer)
    processor = FiberProcessor(tokenizer)
    loader = make_dataloader(load_sample("i3d")["train"], True, batch_size, shuffle=True, seed=0, processor=processor)

    # Medians of per-batch times: this machine may be shared, and a median shrugs off the
    # moments another process takes the cores.
    batches, loader_times = [], []
    batch_iterator = cycle(loader)
    for _ in range(warmup + steps):
        start = time.perf_counter()
        batches.append(next(batch_iterator))
        loader_times.append(time.perf_counter() - start)
    loader_seconds = statistics.median(loader_times[warmup:])

    model.train()
    step_times = []
    for batch in batches:
        start = time.perf_counter()
        batch = {key: value.to(accelerator.device) for key, value in batch.items() if key != "index"}
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        synchronize(device)
        step_times.append(time.perf_counter() - start)
    step_seconds = statistics.median(step_times[warmup:])
    return {
        "setup": setup,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "batch": batch_size,
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
        "loader_ms": 1000 * loader_seconds,
        "step_ms": 1000 * step_seconds,
        "examples_per_s": batch_size / step_seconds,
        "peak_mb": torch.cuda.max_memory_allocated() / 2**20
        if device == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


COLUMNS = (
    "setup",
    "device",
    "batch",
    "params",
    "loader ms/batch",
    "step ms/batch",
    "loader speed-up",
    "train examples/s",
    "peak memory MB",
)


def format_table(rows: list[dict]) -> str:
    """A Markdown table, one row per setup; "loader speed-up" is step time over loader time."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    for row in rows:
        cells = (
            row["setup"],
            row["device"],
            row["batch"],
            f"{row['parameters'] / 1e6:.1f}M",
            f"{row['loader_ms']:.1f}",
            f"{row['step_ms']:.1f}",
            f"{row['step_ms'] / row['loader_ms']:.1f}x",
            f"{row['examples_per_s']:.1f}",
            f"{row['peak_mb']:.0f}",
        )
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--setups", nargs="+", choices=tuple(SETUPS), default=["sample_demo", "t5_small"])
    parser.add_argument("--steps", type=int, default=10, help="Timed training steps per setup.")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed steps first.")
    parser.add_argument("--one_setup", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_setup:
        print(json.dumps(measure(args.one_setup, args.device, args.steps, args.warmup)))
        return 0

    rows = []
    for setup in args.setups:
        # Through `accelerate launch`, as training runs: it sets the threads per process
        # (OMP_NUM_THREADS=1 unless set), and a plain `python` on a busy CPU can be far slower.
        command = [sys.executable, "-m", "accelerate.commands.launch", *ONE_PROCESS, __file__, "--one_setup", setup]
        command += ["--device", args.device, "--steps", str(args.steps), "--warmup", str(args.warmup)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
    print(format_table(rows))
    for row in rows:
        speedup = row["step_ms"] / row["loader_ms"]
        verdict = (
            "ok"
            if speedup >= MIN_LOADER_SPEEDUP
            else f"TOO SLOW: the loader would starve the step (< {MIN_LOADER_SPEEDUP}x)"
        )
        print(f"{row['setup']}: loader {speedup:.1f}x faster than the step: {verdict}")
        if row["setup"] == "t5_base":
            hours = PAPER_STEPS * row["step_ms"] / 1000 / 3600
            print(
                f"t5_base: the paper's 10 epochs ({PAPER_STEPS} steps of {PAPER_BATCH}) would take {hours:.2f} h "
                "here (paper: under 1 h on a V100)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
