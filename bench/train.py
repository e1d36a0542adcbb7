"""Benchmark of a training step: FIBER's loader against it, early fusion against T5; the paper's run projected.

    python bench/train.py                   # the sample demo's model and the paper's, on the CPU (minutes)
    python bench/train.py --device cuda     # the same on a GPU, in bf16 autocast

Per setup (the sample demo's model, as training/configs/sample_demo.yaml; the paper's, T5-base with T5's vocabulary,
batch 64; both early fusion), on a batch of the bundled sample's train split, ms, the best of --repeats in turns:
- loader: `FiberExamples` + `FiberDataCollator` (as training/train.py reads) against datasets' rows one by one;
  goal: at least 5x faster than the step, so that it never starves it;
- step: forward, backward and AdamW of FIBER's model against T5 of the same size on as many text tokens as FIBER's
  encoder reads tokens and features; goal at the paper's size: at least 90% of T5's speed. The step projects the
  paper's 10 epochs of FIBER's 26,000 training clips (evaluation left out; the paper: under an hour on a V100).
"""

import argparse
import math

import torch
import yaml
from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

from fiberbench.data import load_sample
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG
from fiberbench.training.trainer import FiberDataCollator, FiberExamples

import quick

SAMPLE_DEMO = yaml.safe_load(SAMPLE_DEMO_CONFIG.read_text())
# Setup: (its FiberT5Config fields, as --config_overrides spells them; its batch size).
SETUPS = {
    "sample_demo": (SAMPLE_DEMO["config_overrides"], SAMPLE_DEMO["per_device_train_batch_size"]),
    "paper": ("d_model=768,d_ff=3072,d_kv=64,num_heads=12,num_layers=12,num_decoder_layers=12,vocab_size=32128", 64),
}
TINY = "d_model=32,d_ff=64,d_kv=8,num_heads=4"
FIBER_TRAIN_CLIPS, PAPER_EPOCHS, LOADER_GOAL, FUSION_GOAL = 26_000, 10, 5, 0.9


def training_step(model, batch: dict, device: torch.device):
    """One training step of `model` on `batch` (forward, backward, AdamW; bf16 autocast on CUDA)."""
    model.to(device).train()
    batch = {key: value.to(device) for key, value in batch.items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def measure(split, overrides: str, batch_size: int, args) -> dict:
    """ms per batch of the loader, of rows one by one, of FIBER's training step and of T5's, for one setup."""
    processor = FiberProcessor(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH))
    examples, collate = FiberExamples(split, with_video=True), FiberDataCollator(processor)
    rows, indices = split.with_format("numpy"), list(range(batch_size))

    def row_by_row():  # what the Trainer does with a datasets.Dataset: one formatted row per example
        chosen = [rows[index] for index in indices]
        return processor([row["masked_caption"] for row in chosen], labels=[row["label"] for row in chosen],
                         video_features=[row["video_features"] for row in chosen])

    torch.manual_seed(0)
    config = build_tiny_config(processor.tokenizer, "early")
    config.update_from_string(overrides)
    batch = collate(examples.__getitems__(indices))
    # T5's input: as many ordinary pieces (after T5's 3 specials and 100 sentinels) as FIBER's encoder reads.
    length = batch["input_ids"].shape[1] + batch["video_features"].shape[1]
    t5_batch = {"input_ids": torch.randint(103, config.vocab_size, (batch_size, length)), "labels": batch["labels"]}
    device = torch.device(args.device)
    timings = {"loader": lambda: collate(examples.__getitems__(indices)), "rows": row_by_row,
               "step": training_step(FiberT5ForConditionalGeneration(config), batch, device),
               "t5": training_step(T5ForConditionalGeneration(T5Config(**config.to_diff_dict())), t5_batch, device)}
    for function in timings.values():
        function()  # the first call: lazy set-up, caches
    best = dict.fromkeys(timings, float("inf"))
    for _ in range(args.repeats):  # in turns: a busy moment of the machine falls on all alike
        best = {name: min(best[name], 1000 * quick.best_seconds(function)) for name, function in timings.items()}
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (bf16 autocast on CUDA)")
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS))
    parser.add_argument("--repeats", type=int, default=5, help="timings per measurement; the best is kept")
    args = quick.parse_args(parser, repeats=2)
    split = load_sample("i3d")["train"]
    print(f"\nTraining, ms per batch ({args.device}, {torch.get_num_threads()} threads; best of {args.repeats})")
    print(f"| setup | batch | loader | rows one by one | step | T5 step | rows / loader | step / loader | "
          f"step vs T5 | {PAPER_EPOCHS} epochs of FIBER, projected |\n|---|---|---|---|---|---|---|---|---|---|")
    timings = {}
    for setup in args.setups:
        overrides, batch_size = SETUPS[setup]
        ms = timings[setup] = measure(split, TINY if args.quick else overrides, batch_size, args)
        steps = PAPER_EPOCHS * math.ceil(FIBER_TRAIN_CLIPS / batch_size)
        print(f"| {setup} | {batch_size} | {ms['loader']:.1f} | {ms['rows']:.1f} | {ms['step']:.1f} | {ms['t5']:.1f} "
              f"| {ms['rows'] / ms['loader']:.1f}x | {ms['step'] / ms['loader']:.1f}x | {ms['t5'] / ms['step']:.2f} | "
              f"{steps * ms['step'] / 60_000:.1f} min ({steps:,} steps) |")
    loader_ok = all(ms["step"] >= LOADER_GOAL * ms["loader"] for ms in timings.values())
    print(f"loader {LOADER_GOAL}x faster than the step: {quick.verdict(args, 'ok' if loader_ok else 'MISSED')}")
    if "paper" in timings:  # in the sample demo's tiny model, projecting the features is a large share of the work
        fusion_ok = timings["paper"]["t5"] >= FUSION_GOAL * timings["paper"]["step"]
        print(f"early fusion at {FUSION_GOAL:.0%} of T5's speed or more, at the paper's size: "
              f"{quick.verdict(args, 'ok' if fusion_ok else 'MISSED')}")


if __name__ == "__main__":
    main()
