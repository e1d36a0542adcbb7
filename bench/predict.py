"""Benchmark of `fiberbench predict`: clips per second with batched generation against one clip at a time.

For a seq2seq LM (T5, the paper's zero-shot format and decoding: 8 beams) and a causal LM (Llama,
the default prompt through a chat template, greedy), both random and of the same small size
(`fiberbench.predict.tiny_models`, widened): the predictors `fiberbench predict` uses answer the
bundled sample's train captions in batches of --per_device_eval_batch_size, then one at a time.
Model loading is not timed; the noun-phrase choice is left out (it does not depend on batching).
"""

import argparse
import tempfile
import time
from pathlib import Path

import torch

import fiberbench.data
from fiberbench.predict import command
from fiberbench.predict.tiny_models import save_causal, save_seq2seq


def save_models(folder: Path, d_model: int, num_layers: int) -> dict[str, Path]:
    """A random T5 and a random Llama of the same width and depth (the Llama: both T5 stacks' layers)."""
    save_seq2seq(folder / "seq2seq", d_model=d_model, num_layers=num_layers)
    save_causal(folder / "causal", hidden_size=d_model, num_layers=2 * num_layers)
    return {"seq2seq": folder / "seq2seq", "causal": folder / "causal"}


def clips_per_second(predictor, captions: list[str], batch_size: int) -> tuple[float, list[list[str]]]:
    """Clips per second of `predictor` over `captions` in batches of `batch_size`, and its candidates (a causal LM: its
    replies, as generated; reading them is not timed)."""
    rows = [{"masked_caption": caption} for caption in captions]
    answer = predictor.replies if predictor.kind in command.PROMPTED_KINDS else predictor.candidates
    start = time.perf_counter()
    answers = []
    for index in range(0, len(rows), batch_size):
        answers += answer(rows[index : index + batch_size])
    if predictor.model.device.type == "cuda":
        torch.cuda.synchronize()
    return len(rows) / (time.perf_counter() - start), answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (bf16 on GPUs that support it)")
    parser.add_argument("--d_model", type=int, default=256)
    parser.add_argument("--num_layers", type=int, default=4, help="T5 layers each side; the Llama gets twice as many")
    parser.add_argument("--per_device_eval_batch_size", type=int, default=16)
    parser.add_argument("--num_clips", type=int, default=160, help="train captions of the bundled sample")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    captions = fiberbench.data.load_sample("text")["train"]["masked_caption"][: args.num_clips]

    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for kind, path in save_models(Path(folder), args.d_model, args.num_layers).items():
            predict_parser = argparse.ArgumentParser()
            command.add_arguments(predict_parser)
            predict_args = predict_parser.parse_args(["--model_name_or_path", str(path)])
            predict_args.prompt = command.DEFAULT_PROMPT if kind == "causal" else None
            # load_config also sets what make_predictor reads (from_pretrained's Hub options).
            predictor = command.make_predictor(predict_args, kind, command.load_config(predict_args))
            if kind in command.PROMPTED_KINDS:
                predictor.render_texts(captions)
            predictor.load_model(device, dtype)
            clips_per_second(predictor, captions[:4], 4)  # warm-up
            batched, batched_answers = clips_per_second(predictor, captions, args.per_device_eval_batch_size)
            alone, alone_answers = clips_per_second(predictor, captions, 1)
            same = sum(a == b for a, b in zip(batched_answers, alone_answers))
            results[kind] = (predictor.num_beams, batched, alone, same)

    where = f"{device.type} {str(dtype).removeprefix('torch.')}, {torch.get_num_threads()} threads"
    print(
        f"\nfiberbench predict, clips/s ({where}; d_model {args.d_model}; {len(captions)} sample captions; "
        f"batch {args.per_device_eval_batch_size} against 1)"
    )
    print("| model | beams | batched clips/s | one at a time clips/s | batched vs one at a time | same answers |")
    print("|---|---|---|---|---|---|")
    names = {
        "seq2seq": f"T5 seq2seq, {args.num_layers}+{args.num_layers} layers",
        "causal": f"Llama causal, {2 * args.num_layers} layers",
    }
    for kind, (beams, batched, alone, same) in results.items():
        print(
            f"| {names[kind]} | {beams} | {batched:.1f} | {alone:.1f} | {batched / alone:.2f}x | "
            f"{same}/{len(captions)} |"
        )


if __name__ == "__main__":
    main()
