"""Benchmark of `fiberbench predict`: batched generation against one clip at a time, and video LLMs' video path.

1. Language models: for a seq2seq LM (T5, the paper's zero-shot format and decoding: 8 beams) and
   a causal LM (Llama, the default prompt through a chat template, greedy), both random and of the
   same small size (`fiberbench.testing.tiny_models`, widened), clips per second of the predictors
   `fiberbench predict` uses on the bundled sample's train captions, in batches of
   --per_device_eval_batch_size and then one at a time. Model loading is not timed; the
   noun-phrase choice is left out (it does not depend on batching).
2. Video LLMs (needs torchvision): for each family of `video_families.VIDEO_FAMILIES` (tiny random
   models), the same --num_frames frames of synthetic clips put to the model as a video (the video
   path) and as images (the images path): clips per second (decoding the frames included), the
   peak memory while predicting, and the visual tokens a clip costs on each path, with their ratio.
   The token counts come from each family's processor at the tiny models' frame sizes; real models'
   processors read larger frames, so their counts are larger, but what the video path saves
   (Qwen-style temporal merging of frame pairs, LLaVA-OneVision's pooling of video frames) is the same rule.

3. The command's loader against the model alone: for each kind (seq2seq, causal, and the video families
   of --loader_families on their video path), clips per second of `fiberbench predict`'s prediction loop
   (`fiberbench.predict.clips.make_loader`: each batch's clips decoded, processed and tokenized, by
   0 and by --dataloader_num_workers workers, then the model) against the model alone on the same
   batches made beforehand. The goal: the loop with workers at least 0.9x of the model alone, for a
   model that costs at least as much per clip as making its inputs does: the tiny models widened
   (--loader_width, --loader_layers; on a GPU a 2B-sized text model by default, hidden 1536 and 28 layers), over
   --loader_text_clips captions (the text models: 25 batches) and --loader_clips clips (each video family: 10
   batches): a run's steady pace, where starting the workers (a fixed ~0.1 s on two CPU cores) is paid once.

`--quick` runs every part at tiny sizes on a few clips, for two of the video families (the tests run it); its
figures are too small to judge against the goal, and it says so instead of a verdict.
The peak memory is what predicting adds at its peak to the memory in use before (the model loaded):
the process's resident set on the CPU (its peak reset with Linux's clear_refs), torch's allocation on a GPU.
"""

import argparse
import tempfile
import time
from pathlib import Path

import fiberbench.data
import quick
import torch

from fiberbench.predict.arguments import parse_settings
from fiberbench.predict.clips import make_loader
from fiberbench.predict.kinds import predictor_of
from fiberbench.testing.tiny_models import FRAME_SIZE, save_causal, save_seq2seq
from fiberbench.testing.tiny_videos import sample_test_records, write_sample_videos
from fiberbench.testing.video_families import VIDEO_FAMILIES, save_video_family
from fiberbench.videos import find_clip_video

# --quick: one family of each of the video path's savings (Qwen's temporal merging, LLaVA-OneVision's pooling).
QUICK_FAMILIES = ["qwen2_vl", "llava_onevision"]
PATHS = ("video", "images")  # --video_input
# The loop with its loader against the model alone, at least.
GOAL = 0.9
# On a GPU the loader part's text models are of a real size by default: Qwen2-VL-2B's language model's width and depth.
REAL_WIDTH, REAL_LAYERS = 1536, 28


def save_models(folder: Path, d_model: int, num_layers: int) -> dict[str, Path]:
    """A random T5 and a random Llama of the same width and depth (the Llama: both T5 stacks' layers)."""
    save_seq2seq(folder / "seq2seq", d_model=d_model, num_layers=num_layers)
    save_causal(folder / "causal", hidden_size=d_model, num_layers=2 * num_layers)
    return {"seq2seq": folder / "seq2seq", "causal": folder / "causal"}


def make_predictor(model: Path, device: torch.device, dtype: torch.dtype, rows: list[dict], *flags: str):
    """The predictor `fiberbench predict` makes for `model` with `flags`, the texts of `rows` rendered (a model that
    reads a prompt), its weights loaded on `device`."""
    predictor = predictor_of(parse_settings(["--model_name_or_path", model, *flags]))
    if predictor.prompted:
        predictor.render_texts([row["masked_caption"] for row in rows])
    predictor.load_model(device, dtype)
    return predictor


def clips_per_second(predictor, rows: list[dict], batch_size: int) -> tuple[float, list[list[str]]]:
    """Clips per second of `predictor` over `rows` in batches of `batch_size`, and its candidates (a causal or
    video-language model: its replies, as generated; reading them is not timed)."""
    start = time.perf_counter()
    answers = []
    for index in range(0, len(rows), batch_size):
        answers += answer_of(predictor)(predictor.inputs(rows[index : index + batch_size]))
    if predictor.model.device.type == "cuda":
        torch.cuda.synchronize()
    return len(rows) / (time.perf_counter() - start), answers


def answer_of(predictor):
    """The predictor's answering from a batch's inputs: its replies (a causal or video-language model), else its
    candidates."""
    return predictor.replies if predictor.prompted else predictor.candidates


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
            predictor = make_predictor(path, device, dtype, rows)
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
            flags = ["--video_dir", str(video_dir), "--num_frames", str(args.num_frames), "--video_input"]
            paths = {path: make_predictor(model, device, dtype, rows, *flags, path) for path in PATHS}
            for predictor in paths.values():
                clips_per_second(predictor, rows[:2], 2)  # warm-up
            # The paths take turns, each keeping its best round: a change in the machine's load touches both alike.
            speeds = dict.fromkeys(paths, 0.0)
            for _ in range(args.repeats):
                for path, predictor in paths.items():
                    speeds[path] = max(speeds[path], clips_per_second(predictor, rows, args.video_batch_size)[0])
            results[family] = {}
            for path, predictor in paths.items():
                in_use = reset_peak_memory(device)
                clips_per_second(predictor, rows, args.video_batch_size)
                peak = None if in_use is None else peak_memory_mb(device) - in_use
                # Every synthetic clip gives the same frame sizes: the first one's tokens are each clip's.
                (_, inputs), *_ = predictor.inputs(rows[:1])
                results[family][path] = (speeds[path], peak, predictor.num_visual_tokens(inputs))

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


def widen_video_family(folder: Path, width: int, layers: int) -> None:
    """The model saved in `folder` with its text model `width` wide (heads of 16) and `layers` deep, random weights
    again; its processor kept. Only the text model changes: its cost per generated token is a real model's."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(folder)
    text = config.get_text_config()
    text.hidden_size, text.intermediate_size, text.num_hidden_layers = width, 4 * width, layers
    text.num_attention_heads, text.num_key_value_heads = width // 16, max(1, width // 32)
    if getattr(text, "layer_types", None):  # one attention type per layer (the tiny models': all alike)
        text.layer_types = [text.layer_types[0]] * layers
    if config.model_type.startswith("qwen"):
        config.vision_config.hidden_size = width  # Qwen's vision merger outputs the text model's width
    with torch.random.fork_rng():
        torch.manual_seed(0)
        AutoModelForImageTextToText.from_config(config).save_pretrained(folder)


def loop_against_model(predictor, shard, split, videos, args, device) -> dict:
    """Clips/s of making the inputs alone, of the model alone on inputs made beforehand, and of the prediction loop
    (loader and model) with 0 and with N workers; the measurements take turns, each keeping its best round."""
    answer = answer_of(predictor)
    pin = device.type == "cuda"

    def loader(num_workers: int):
        return make_loader(
            predictor, shard, batch_size=args.per_device_eval_batch_size, split=split, videos=videos,
            num_workers=num_workers, pin_memory=pin,
        )

    def loop(num_workers: int) -> None:
        for batch in loader(num_workers):
            answer(batch.inputs)

    made = list(loader(0))
    answer(made[0].inputs)  # warm-up
    runs = {
        "inputs": lambda: list(loader(0)),
        # On a GPU the batches made beforehand stay on it after the first round: the model alone copies nothing more.
        "model": lambda: [answer(batch.inputs) for batch in made],
        "loop_0": lambda: loop(0),
        "loop_workers": lambda: loop(args.workers),
    }
    rates = dict.fromkeys(runs, 0.0)
    for _ in range(args.repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize()
            rates[name] = max(rates[name], len(shard) / (time.perf_counter() - start))
    return rates


def loader_part(args, device, dtype) -> None:
    """Part 3: the prediction loop with its loader against the model alone, per kind, with 0 and N workers."""
    import importlib.util

    import fiberbench.data

    width, layers = args.loader_width, args.loader_layers
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        text_split = fiberbench.data.load_sample("text")["train"]
        # A fast text model's loop over 160 captions lasts about a second, of which starting the workers and the
        # copy-on-write of this process's pages while they live take about 0.13 s (0.90x; 0.93-0.95x over 400).
        text_shard = list(range(min(args.loader_text_clips, len(text_split))))
        rows = [{"masked_caption": text_split[index]["masked_caption"]} for index in text_shard]
        for kind, path in save_models(Path(folder) / "text", width, layers // 2).items():
            predictor = make_predictor(path, device, dtype, rows)
            results[kind] = loop_against_model(predictor, text_shard, text_split, None, args, device)
        if importlib.util.find_spec("torchvision") is not None:
            video_dir = Path(folder) / "videos"
            write_sample_videos(video_dir, whole_videos=False)
            video_split = fiberbench.data.load_sample("text")["test"]
            # A run's regime, not its start: the sample's test clips over again up to --loader_clips (each decoded
            # every time), as many as the text models get. Over 2 batches, forking the workers and the first batch,
            # which nothing overlaps, weighed as much as the run (0.74x at 32 clips, 0.90x at 160 for Qwen2-VL).
            video_shard = [index % len(video_split) for index in range(args.loader_clips)]
            keys = zip(video_split["video_id"], video_split["video_start_time"], video_split["video_end_time"])
            videos = [find_clip_video(video_dir, *key) for key in keys]
            rows = [{"masked_caption": video_split[index]["masked_caption"]} for index in video_shard]
            for family in args.loader_families:
                model = Path(folder) / family
                save_video_family(family, model)
                widen_video_family(model, width, layers)
                flags = ["--video_dir", str(video_dir), "--num_frames", str(args.num_frames), "--video_input", "video"]
                predictor = make_predictor(model, device, dtype, rows, *flags)
                results[family] = loop_against_model(predictor, video_shard, video_split, videos, args, device)

    print(
        f"\nfiberbench predict's loop (loader and model) against the model alone, clips/s ({where(device, dtype)}; "
        f"random text models {width} wide, {layers} layers, over {len(text_shard)} captions; video: "
        f"{args.loader_clips} clips of {args.num_frames} frames of {FRAME_SIZE} px on the video path; batches of "
        f"{args.per_device_eval_batch_size}; best of {args.repeats})"
    )
    workers = f"{args.workers} workers"
    print(
        f"| model | inputs alone | model alone | inputs / model time | loop, 0 workers | loop, {workers} | "
        f"0 workers / alone | {workers} / alone | goal >= {GOAL}x |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, rates in results.items():
        with_workers = rates["loop_workers"] / rates["model"]
        verdict = "ok" if with_workers >= GOAL else "MISSED"
        if rates["inputs"] < rates["model"]:
            verdict += " (making the inputs costs more than the model: not the goal's case)"
        verdict = quick.verdict(args, verdict)
        print(
            f"| {name} | {rates['inputs']:.1f} | {rates['model']:.1f} | {rates['model'] / rates['inputs']:.2f} | "
            f"{rates['loop_0']:.1f} | {rates['loop_workers']:.1f} | {rates['loop_0'] / rates['model']:.2f}x | "
            f"{with_workers:.2f}x | {verdict} |"
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
    parser.add_argument(
        "--loader_families", nargs="+", choices=list(VIDEO_FAMILIES), default=QUICK_FAMILIES,
        help="Part 3: the video families measured on their video path",
    )
    parser.add_argument(
        "--loader_width", type=int, default=None,
        help=f"Part 3: the text models' width (default 256 on the CPU, {REAL_WIDTH} on a GPU)",
    )
    parser.add_argument(
        "--loader_layers", type=int, default=None,
        help=f"Part 3: the text models' layers (the T5: half each side; default 8 on the CPU, {REAL_LAYERS} on a GPU)",
    )
    parser.add_argument("--workers", type=int, default=2, help="Part 3: data loader workers against 0")
    parser.add_argument(
        "--loader_text_clips", type=int, default=400,
        help="Part 3: captions for the text models (the sample's train captions, at most its 400)",
    )
    parser.add_argument(
        "--loader_clips", type=int, default=160,
        help="Part 3: clips per video family (the sample's test clips over again)",
    )
    args = quick.parse_args(
        parser, d_model=32, num_layers=1, num_clips=8, num_frames=4, num_video_clips=4, video_batch_size=4, repeats=1,
        families=QUICK_FAMILIES, loader_width=64, loader_layers=2, per_device_eval_batch_size=4, loader_clips=8,
        loader_text_clips=8,
    )
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    on_gpu = device.type == "cuda"
    args.loader_width = args.loader_width or (REAL_WIDTH if on_gpu else 256)
    args.loader_layers = args.loader_layers or (REAL_LAYERS if on_gpu else 8)
    language_models(args, device, dtype)
    video_llms(args, device, dtype)
    loader_part(args, device, dtype)


if __name__ == "__main__":
    main()
