"""Benchmark of `fiberbench predict`: batched generation against one clip at a time, and video LLMs' video path.

1. Language models: for a seq2seq LM (T5, the paper's zero-shot format and decoding: 8 beams) and
   a causal LM (Llama, the default prompt through a chat template, greedy), both random and of the
   same small size (`fiberbench.predict.tiny_models`, widened), clips per second of the predictors
   `fiberbench predict` uses on the bundled sample's train captions, in batches of
   --per_device_eval_batch_size and then one at a time. Model loading is not timed; the
   noun-phrase choice is left out (it does not depend on batching).
2. Video LLMs (needs torchvision): for each family of `tiny_models.VIDEO_FAMILIES` (tiny random
   models), the same --num_frames frames of synthetic clips put to the model as a video (the video
   path) and as images (the images path): clips per second (decoding the frames included), the
   peak memory while predicting, and the visual tokens a clip costs on each path, with their ratio.
   The token counts come from each family's processor at the tiny models' frame sizes; real models'
   processors read larger frames, so their counts are larger, but what the video path saves
   (Qwen-style temporal merging of frame pairs, LLaVA-OneVision's pooling of video frames) is the same rule.

`--quick` runs both parts at tiny sizes on a few clips, for two of the video families (the tests run it).
The peak memory is what predicting adds at its peak to the memory in use before (the model loaded):
the process's resident set on the CPU (its peak reset with Linux's clear_refs), torch's allocation on a GPU.
"""

import argparse
import tempfile
import time
from pathlib import Path

import torch

import fiberbench.data
from fiberbench.predict import command
from fiberbench.predict.tiny_models import (
    FRAME_SIZE,
    VIDEO_FAMILIES,
    sample_test_records,
    save_causal,
    save_seq2seq,
    save_video_family,
    write_sample_videos,
)
from fiberbench.predict.videos import find_clip_video, sample_frames

import quick

# --quick: one family of each of the video path's savings (Qwen's temporal merging, LLaVA-OneVision's pooling).
QUICK_FAMILIES = ["qwen2_vl", "llava_onevision"]


def save_models(folder: Path, d_model: int, num_layers: int) -> dict[str, Path]:
    """A random T5 and a random Llama of the same width and depth (the Llama: both T5 stacks' layers)."""
    save_seq2seq(folder / "seq2seq", d_model=d_model, num_layers=num_layers)
    save_causal(folder / "causal", hidden_size=d_model, num_layers=2 * num_layers)
    return {"seq2seq": folder / "seq2seq", "causal": folder / "causal"}


def make_predictor(model: Path, kind: str, device: torch.device, dtype: torch.dtype, rows: list[dict], *flags: str):
    """The predictor `fiberbench predict` makes for `model` with `flags`, the texts of `rows` rendered (a model that
    reads a prompt), its weights loaded on `device`."""
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--model_name_or_path", str(model), *flags])
    args.prompt = command.DEFAULT_PROMPT if kind in command.PROMPTED_KINDS else None
    # load_config also sets what make_predictor reads (from_pretrained's Hub options).
    predictor = command.make_predictor(args, kind, command.load_config(args))
    if kind in command.PROMPTED_KINDS:
        predictor.render_texts([row["masked_caption"] for row in rows])
    predictor.load_model(device, dtype)
    return predictor


def clips_per_second(predictor, rows: list[dict], batch_size: int) -> tuple[float, list[list[str]]]:
    """Clips per second of `predictor` over `rows` in batches of `batch_size`, and its candidates (a causal or
    video-language model: its replies, as generated; reading them is not timed)."""
    answer = predictor.replies if predictor.kind in command.PROMPTED_KINDS else predictor.candidates
    start = time.perf_counter()
    answers = []
    for index in range(0, len(rows), batch_size):
        answers += answer(rows[index : index + batch_size])
    if predictor.model.device.type == "cuda":
        torch.cuda.synchronize()
    return len(rows) / (time.perf_counter() - start), answers


def reset_peak_memory(device: torch.device) -> float | None:
    """Start measuring the peak memory anew; the memory in use now (MB), or None when it cannot be measured here."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device) / 2**20
    try:  # Linux: writing 5 resets the peak resident set size (VmHWM) to the current one
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _status_mb("VmRSS")


def peak_memory_mb(device: torch.device) -> float:
    """The peak since `reset_peak_memory`: torch's allocation on a GPU, the process's resident set on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return _status_mb("VmHWM")


def _status_mb(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith(f"{field}:")).split()[1]) / 1024


def language_models(args, device, dtype) -> None:
    captions = fiberbench.data.load_sample("text")["train"]["masked_caption"][: args.num_clips]
    rows = [{"masked_caption": caption} for caption in captions]
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for kind, path in save_models(Path(folder), args.d_model, args.num_layers).items():
            predictor = make_predictor(path, kind, device, dtype, rows)
            clips_per_second(predictor, rows[:4], 4)  # warm-up
            batched, batched_answers = clips_per_second(predictor, rows, args.per_device_eval_batch_size)
            alone, alone_answers = clips_per_second(predictor, rows, 1)
            same = sum(a == b for a, b in zip(batched_answers, alone_answers))
            results[kind] = (predictor.num_beams, batched, alone, same)

    print(
        f"\nfiberbench predict, language models, clips/s ({where(device, dtype)}; d_model {args.d_model}; "
        f"{len(rows)} sample captions; batch {args.per_device_eval_batch_size} against 1)"
    )
    print("| model | beams | batched clips/s | one at a time clips/s | batched vs one at a time | same answers |")
    print("|---|---|---|---|---|---|")
    names = {
        "seq2seq": f"T5 seq2seq, {args.num_layers}+{args.num_layers} layers",
        "causal": f"Llama causal, {2 * args.num_layers} layers",
    }
    for kind, (beams, batched, alone, same) in results.items():
        ratio = batched / alone
        print(f"| {names[kind]} | {beams} | {batched:.1f} | {alone:.1f} | {ratio:.2f}x | {same}/{len(rows)} |")


def video_llms(args, device, dtype) -> None:
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        print("\nVideo LLMs: not measured (transformers' video processors need torchvision; see the README)")
        return
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        video_dir = Path(folder) / "videos"
        write_sample_videos(video_dir, whole_videos=False)
        rows = []
        for record in sample_test_records()[: args.num_video_clips]:
            key = (record["video_id"], record["video_start_time"], record["video_end_time"])
            rows.append({"masked_caption": record["masked_caption"], "video": find_clip_video(video_dir, *key)})
        for family in args.families:
            model = Path(folder) / family
            save_video_family(family, model)
            results[family] = {}
            for video_input in ("video", "images"):
                flags = ["--video_dir", str(video_dir), "--num_frames", str(args.num_frames)]
                predictor = make_predictor(model, "video", device, dtype, rows, *flags, "--video_input", video_input)
                clips_per_second(predictor, rows[:2], 2)  # warm-up
                in_use = reset_peak_memory(device)
                # The best of --repeats: the least disturbed by other work on the machine.
                speed = max(clips_per_second(predictor, rows, args.video_batch_size)[0] for _ in range(args.repeats))
                peak = None if in_use is None else peak_memory_mb(device) - in_use
                # Every synthetic clip gives the same frame sizes: the first one's tokens are each clip's.
                inputs = predictor.model_inputs(rows[:1], [sample_frames(rows[0]["video"], predictor.sampling)])
                results[family][video_input] = (speed, peak, predictor.num_visual_tokens(inputs))

    print(
        f"\nfiberbench predict, video LLMs: the video path against the images path ({where(device, dtype)}; tiny "
        f"random models; {len(rows)} synthetic 10 s clips of {args.num_frames} frames of {FRAME_SIZE} px; batch "
        f"{args.video_batch_size}; best of {args.repeats})"
    )
    print(
        "| family | video clips/s | images clips/s | video vs images speed | video peak MB added | "
        "images peak MB added | visual tokens per clip, video | images | images / video tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for family, paths in results.items():
        video_speed, video_peak, video_tokens = paths["video"]
        images_speed, images_peak, images_tokens = paths["images"]
        print(
            f"| {family} | {video_speed:.1f} | {images_speed:.1f} | {video_speed / images_speed:.2f}x | "
            f"{megabytes(video_peak)} | {megabytes(images_peak)} | {video_tokens} | {images_tokens} | "
            f"{images_tokens / video_tokens:.2f}x |"
        )


def megabytes(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f}"


def where(device: torch.device, dtype: torch.dtype) -> str:
    return f"{device.type} {str(dtype).removeprefix('torch.')}, {torch.get_num_threads()} threads"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (bf16 on GPUs that support it)")
    parser.add_argument("--d_model", type=int, default=256)
    parser.add_argument("--num_layers", type=int, default=4, help="T5 layers each side; the Llama gets twice as many")
    parser.add_argument("--per_device_eval_batch_size", type=int, default=16)
    parser.add_argument("--num_clips", type=int, default=160, help="train captions of the bundled sample")
    parser.add_argument("--families", nargs="+", choices=list(VIDEO_FAMILIES), default=list(VIDEO_FAMILIES))
    parser.add_argument("--num_frames", type=int, default=8, help="frames per clip for the video LLMs")
    parser.add_argument("--num_video_clips", type=int, default=32, help="test clips of the sample, synthetic videos")
    parser.add_argument("--video_batch_size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the video clips; the best counts")
    args = quick.parse_args(
        parser, d_model=32, num_layers=1, num_clips=8, num_frames=4, num_video_clips=4, video_batch_size=4, repeats=1,
        families=QUICK_FAMILIES,
    )
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    language_models(args, device, dtype)
    video_llms(args, device, dtype)


if __name__ == "__main__":
    main()
