"""Benchmark of `fiberbench predict`: batched against one clip at a time; video LLMs' video path against their images.

1. A seq2seq LM (T5: the paper's format, 8 beams) and a causal LM (Llama: the default prompt through a chat template),
   random, of --d_model and --num_layers: clips/s on the sample's captions in batches of --per_device_eval_batch_size
   and one at a time (loading the model and reading the replies not timed).
2. Video LLMs (needs torchvision; `--families` with no name skips them): each family of
   `fiberbench.testing.video_families` on the same --num_frames frames of --num_video_clips synthetic clips, put in as
   a video and as images: clips/s (decoding included) and the visual tokens a clip costs (at the tiny models' frame
   size; what the video path saves, Qwen's merging of frame pairs or LLaVA-OneVision's pooling, is the same rule at
   any size).
"""

import argparse
import tempfile
from pathlib import Path

import torch

from fiberbench.data import SAMPLE_DIR
from fiberbench.model_config import load_config
from fiberbench.models import locate_model
from fiberbench.predict.arguments import parser_of
from fiberbench.predict.predictors import PROMPTED_KINDS, choose_kind, make_predictor
from fiberbench.predict.prompts import DEFAULT_PROMPT
from fiberbench.testing.tiny_models import save_causal, save_seq2seq
from fiberbench.testing.tiny_videos import read_records, write_videos
from fiberbench.testing.video_families import VIDEO_FAMILIES, save_video_family
from fiberbench.videos import find_clip_video

import quick


def predictor_of(model: Path, device, *flags):
    """The predictor `fiberbench predict` makes for `model` with `flags`, its weights loaded on `device`."""
    args = parser_of().parse_args(["--model_name_or_path", str(model), *map(str, flags)])
    source = locate_model(args.model_name_or_path)
    config = load_config(source)
    kind = choose_kind(args, config)
    args.prompt = DEFAULT_PROMPT if kind in PROMPTED_KINDS else None  # as the command does
    predictor = make_predictor(kind, args, source, config)
    predictor.load_model(device, torch.float32)
    return predictor


def clips_per_second(predictor, rows: list[dict], batch_size: int) -> float:
    batches = [rows[start : start + batch_size] for start in range(0, len(rows), batch_size)]
    return len(rows) / quick.best_seconds(lambda: [predictor.generate(predictor.inputs(batch)) for batch in batches])


def batched(args, device, folder: Path, rows: list[dict]) -> None:
    print(f"\nfiberbench predict, language models, clips/s ({device}; d_model {args.d_model}, {args.num_layers} "
          f"layers; {len(rows)} captions)")
    print("| model | beams | batched clips/s | one at a time clips/s | batched vs one at a time |\n|---|---|---|---|---|")
    save_seq2seq(folder / "seq2seq", d_model=args.d_model, num_layers=args.num_layers)
    save_causal(folder / "causal", hidden_size=args.d_model, num_layers=2 * args.num_layers)
    for kind in ("seq2seq", "causal"):
        predictor = predictor_of(folder / kind, device)
        clips_per_second(predictor, rows[:4], 4), clips_per_second(predictor, rows[:2], 1)  # warm-up, both shapes
        many = clips_per_second(predictor, rows, args.per_device_eval_batch_size)
        one = clips_per_second(predictor, rows, 1)
        print(f"| {kind} | {predictor.num_beams} | {many:.1f} | {one:.1f} | {many / one:.2f}x |")


def video_paths(args, device, folder: Path) -> None:
    records = read_records(SAMPLE_DIR, "test")[: args.num_video_clips]
    write_videos(folder, records)
    rows = [{"masked_caption": record["masked_caption"], "video": find_clip_video(
        folder, record["video_id"], record["video_start_time"], record["video_end_time"])} for record in records]
    print(f"\nfiberbench predict, video LLMs: the video path against the images path ({device}; tiny random models; "
          f"{len(rows)} clips of {args.num_frames} frames)")
    print("| family | video clips/s | images clips/s | video tokens per clip | images tokens per clip "
          "| images / video tokens |\n|---|---|---|---|---|---|")
    for family in args.families:
        save_video_family(family, folder / family)
        figures = {}
        for path in ("video", "images"):
            predictor = predictor_of(folder / family, device, "--video_dir", folder, "--num_frames", args.num_frames,
                                     "--video_input", path)
            ids = {getattr(predictor.processor, f"{name}_token_id", None) for name in ("image", "video")} - {None}
            tokens = sum(int((inputs["input_ids"] == id_).sum()) for _, inputs in predictor.inputs(rows) for id_ in ids)
            figures[path] = (clips_per_second(predictor, rows, args.per_device_eval_batch_size), tokens / len(rows))
        (video, video_tokens), (images, images_tokens) = figures["video"], figures["images"]
        print(f"| {family} | {video:.1f} | {images:.1f} | {video_tokens:.0f} | {images_tokens:.0f} | "
              f"{images_tokens / video_tokens:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=torch.device, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--d_model", type=int, default=256)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--num_clips", type=int, default=400)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=16)
    parser.add_argument("--families", nargs="*", choices=list(VIDEO_FAMILIES), default=list(VIDEO_FAMILIES))
    parser.add_argument("--num_video_clips", type=int, default=32)
    parser.add_argument("--num_frames", type=int, default=8)
    args = quick.parse_args(parser, d_model=32, num_layers=1, num_clips=16, families=["qwen2_vl", "llava_onevision"],
                            num_video_clips=4, num_frames=4)
    captions = [record["masked_caption"] for split in ("train", "validation", "test")
                for record in read_records(SAMPLE_DIR, split)]
    rows = [{"masked_caption": captions[index % len(captions)]} for index in range(args.num_clips)]
    with tempfile.TemporaryDirectory() as folder:
        batched(args, args.device, Path(folder), rows)
        if args.families:
            video_paths(args, args.device, Path(folder))


if __name__ == "__main__":
    main()
