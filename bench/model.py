"""Benchmark of the FIBER model: early fusion's training speed against T5, fill_blanks with the lazy noun-phrase choice.

    python bench/model.py [--device cuda] [--quick]

1. Training steps/s of early fusion (T text tokens + V video features) against T5 on T + V text tokens, same sizes
   and weights: the fusion's own cost (target: within 10%); FIBER text-only on T + V tokens is a control.
2. Answers/s of `fill_blanks` (beams 4) on the sample's validation and test clips, after a short training so that
   the beams look like answers: the lazy noun-phrase choice (beam r parsed only where beams 0..r-1 were rejected)
   against parsing every beam first, on the same beams, with the parses of each.
"""

import argparse
import time
from collections import Counter

import torch
from spacy.language import Language
from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

from fiberbench.data import load_sample
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.modeling.decoding import choose_noun_phrases
from fiberbench.modeling.noun_phrases import are_noun_phrases, load_spacy_pipeline

import quick

PARSES = Counter()


@Language.component("fiber_bench_parse_counter")
def count_parses(doc):
    """Count every caption the pipeline parses (the noun-phrase rule runs one parse per candidate)."""
    PARSES["docs"] += 1
    return doc


def bench_config(tokenizer, args, fusion: str = "early"):
    """A config of the benchmark's size: 4 heads, d_ff 4 x d_model, as many layers each side."""
    return build_tiny_config(tokenizer, fusion, d_model=args.d_model, d_kv=args.d_model // 4, d_ff=4 * args.d_model,
                             num_heads=4, num_layers=args.num_layers, num_decoder_layers=args.num_layers)


def make_training_step(model, batch: dict, device: torch.device):
    """One training step of `model` on `batch` (forward, backward, AdamW), waiting for the GPU."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return step


def bench_training(args, tokenizer, device: torch.device) -> dict[str, float]:
    """Steps/s of T5, of FIBER text-only (a control: the same work) and of FIBER early fusion (best of the repeats)."""
    config = bench_config(tokenizer, args)
    torch.manual_seed(0)
    models = {
        "t5": T5ForConditionalGeneration(T5Config(**config.to_diff_dict())),
        "none": FiberT5ForConditionalGeneration(bench_config(tokenizer, args, "none")),
        "early": FiberT5ForConditionalGeneration(config),
    }
    for model in models.values():
        model.load_state_dict(models["early"].state_dict(), strict=False)  # the same T5 weights

    generator = torch.Generator().manual_seed(0)
    # Ordinary pieces only: ids after T5's 3 specials and 100 sentinels.
    labels, text = (torch.randint(103, len(tokenizer), (args.batch_size, length), generator=generator)
                    for length in (8, args.text_length + args.video_length))
    video = torch.randn(args.batch_size, args.video_length, config.video_feature_size, generator=generator)
    batches = {"t5": {"input_ids": text, "labels": labels}, "none": {"input_ids": text, "labels": labels},
               "early": {"input_ids": text[:, : args.text_length], "video_features": video, "labels": labels}}
    steps = {
        name: make_training_step(model.to(device), {key: value.to(device) for key, value in batch.items()}, device)
        for (name, model), batch in zip(models.items(), batches.values())
    }
    for step in steps.values():
        step()  # warm-up
    best = dict.fromkeys(steps, float("inf"))
    for repeat in range(args.repeats):  # in turns, alternating, so that a busy moment falls on all alike
        for name in list(steps)[:: 1 if repeat % 2 == 0 else -1]:
            best[name] = min(best[name], best_of(1, lambda: [steps[name]() for _ in range(args.steps)])[0] / args.steps)
    return {name: 1 / seconds for name, seconds in best.items()}


def train_briefly(model, processor: FiberProcessor, args, device: torch.device) -> None:
    """`args.train_steps` steps on the sample's train split, so that beams are answer-like, not noise."""
    train = load_sample("i3d")["train"]
    records, videos = train.to_list(), train.with_format("numpy")["video_features"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(args.train_steps):
        chosen = torch.randint(len(records), (args.batch_size,), generator=generator).tolist()
        batch = processor([records[i]["masked_caption"] for i in chosen], video_features=[videos[i] for i in chosen],
                          labels=[records[i]["label"] for i in chosen]).to(device)
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    model.eval()


def best_of(repeats: int, function):
    """The shortest of `repeats` runs (the least disturbed by the machine) and its result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        PARSES.clear()
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def choose_after_parsing_every_beam(masked_captions, candidates, nlp) -> list[str]:
    """The first noun-phrase candidate of each example, from one parse of every candidate."""
    pairs = [(caption, answer) for caption, ranked in zip(masked_captions, candidates) for answer in ranked]
    flags = iter(are_noun_phrases([caption for caption, _ in pairs], [answer for _, answer in pairs], nlp))
    choices = []
    for ranked in candidates:
        noun_phrases = [answer for answer, is_noun_phrase in zip(ranked, flags) if is_noun_phrase]
        choices.append(noun_phrases[0] if noun_phrases else ranked[0])
    return choices


def bench_decoding(args, tokenizer, device: torch.device) -> dict:
    """Seconds of fill_blanks' generation (beams 4), and seconds and parses of each noun-phrase choice."""
    torch.manual_seed(0)
    model = FiberT5ForConditionalGeneration(bench_config(tokenizer, args)).to(device)
    processor = FiberProcessor(tokenizer)
    train_briefly(model, processor, args, device)
    sample, captions, videos = load_sample("i3d"), [], []
    for split in ("validation", "test"):
        captions += sample[split]["masked_caption"]
        videos += list(sample[split].with_format("numpy")["video_features"])
    captions, videos = captions[: args.num_clips], videos[: args.num_clips]

    generation_seconds, filled = best_of(args.repeats, lambda: model.fill_blanks(
        processor, captions, videos, num_beams=4, only_noun_phrases=False, return_candidates=True,
        batch_size=args.batch_size))
    candidates = [ranked for _, ranked in filled]
    nlp = load_spacy_pipeline(args.spacy_model)
    nlp.add_pipe("fiber_bench_parse_counter", first=True)
    choices = {}
    for name, choose in (("lazy", choose_noun_phrases), ("every beam", choose_after_parsing_every_beam)):
        seconds, chosen = best_of(args.repeats, lambda: choose(captions, candidates, nlp))
        choices[name] = {"seconds": seconds, "parses": PARSES["docs"], "chosen": chosen}
    if choices["lazy"]["chosen"] != choices["every beam"]["chosen"]:
        raise SystemExit("The lazy and the every-beam noun-phrase choices disagree.")
    summary = {"examples": len(captions), "candidates": sum(map(len, candidates)), "generation": generation_seconds}
    return summary | choices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (bf16 autocast on CUDA)")
    parser.add_argument("--d_model", type=int, default=256)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--text_length", type=int, default=32, help="caption tokens per example")
    parser.add_argument("--video_length", type=int, default=32, help="video features per example")
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs per measurement; the best is kept")
    parser.add_argument("--train_steps", type=int, default=150, help="sample training before the decoding bench")
    parser.add_argument("--num_clips", type=int, default=None, help="sample clips to decode (default: all 120)")
    parser.add_argument("--spacy_model", default=None)
    args = quick.parse_args(parser, d_model=32, num_layers=1, batch_size=8, text_length=8, video_length=8, steps=1,
                            repeats=1, train_steps=2, num_clips=16)
    device = torch.device(args.device)
    tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
    where = f"{device.type}{' bf16' if device.type == 'cuda' else ''}, {torch.get_num_threads()} threads"
    shape = f"d_model {args.d_model}, {args.num_layers}+{args.num_layers} layers, batch {args.batch_size}"

    training = bench_training(args, tokenizer, device)
    text, video = args.text_length, args.video_length
    print(f"\nTraining steps/s ({where}; {shape}; best of {args.repeats} x {args.steps} steps)")
    print("| model | encoder input | steps/s | vs T5 |\n|---|---|---|---|")
    for name, model, encoder_input in (("t5", "T5ForConditionalGeneration", f"{text + video} text tokens"),
                                       ("none", "FIBER text only (control)", f"{text + video} text tokens"),
                                       ("early", "FIBER early fusion", f"{text} text tokens + {video} video features")):
        print(f"| {model} | {encoder_input} | {training[name]:.2f} | {training[name] / training['t5']:.2f} |")
    target = quick.verdict(args, "target: at least 90%")
    print(f"early fusion runs at {training['early'] / training['t5']:.0%} of T5's speed ({target})")

    decoding = bench_decoding(args, tokenizer, device)
    examples, generation = decoding["examples"], decoding["generation"]
    every_beam = decoding["every beam"]
    print(f"\nfill_blanks answers/s ({where}; {shape}; beams 4; {examples} sample clips, "
          f"{decoding['candidates']} distinct beam answers; {args.train_steps} training steps first; "
          f"best of {args.repeats})")
    print("| noun-phrase choice | parses | choice seconds | answers/s with generation | vs every beam |")
    print("|---|---|---|---|---|")
    print(f"| none (generation only: {generation:.2f} s) | 0 | 0 | {examples / generation:.1f} | |")
    for name in ("every beam", "lazy"):
        choice = decoding[name]
        total = generation + choice["seconds"]
        print(f"| {name} | {choice['parses']} | {choice['seconds']:.3f} | {examples / total:.1f} | "
              f"{(generation + every_beam['seconds']) / total:.2f}x end to end, "
              f"{every_beam['seconds'] / choice['seconds']:.1f}x choice |")


if __name__ == "__main__":
    main()
