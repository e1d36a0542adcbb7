"""Benchmark of `fiberbench extract-features`: decoding alone, encoding alone, and both serial and overlapped.

    python bench/features.py                      # CPU: 8 clips, random ViT-B/16 and VideoMAE-base
    python bench/features.py --device cuda --num_clips 256 --per_device_batch_size 32   # a GPU, in bf16

Synthetic clips like VaTeX's (10 s at 25 fps, 640 x 360, H.264 of moving texture) are written once to --cache_dir.
Encoders of real size, random weights (--quick: the tests' tiny ones), with the command's default sampling: CLIP
ViT-B/16 on 1 frame a second, VideoMAE-base on one window of 16 frames. With the command's code (`make_loader`,
`ClipPreparer`, `Encoder`, `encode_clips`), in clips/s, the best of --repeats rounds taken in turns: decode (the
loader alone: PyAV and the processor, in the command's default number of workers), encode (the encoder alone, on
batches decoded beforehand), serial (decoding in this process, then encoding), overlapped (the workers decoding while
the model encodes, as the command runs). Goal: the encoder is the bottleneck, never the decoder: overlapped takes at
most 1.2x the time of encode alone.
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig

from fiberbench.cli import default_num_workers
from fiberbench.data.features.command import frame_sampling
from fiberbench.data.features.encoders import ClipPreparer, Encoder, encode_clips, encoder_spec, make_loader
from fiberbench.testing.tiny_encoders import BASE_CLIP, BASE_VIDEOMAE, TINY_CLIP, TINY_VIDEOMAE, save_clip, save_videomae
from fiberbench.videos import Clip, ClipVideo

import quick

# Encoder -> how to save it, its config of real size, its tiny config (--quick).
ENCODERS = {"clip_vit_b16": (save_clip, BASE_CLIP, TINY_CLIP),
            "videomae_base": (save_videomae, BASE_VIDEOMAE, TINY_VIDEOMAE)}
# No sampling flags: the command samples as it does by default for the encoder's kind.
DEFAULT_SAMPLING_FLAGS = argparse.Namespace(fps=None, max_frames=None, num_frames=None)
SECONDS, FPS, WIDTH, HEIGHT, GOAL = 10, 25, 640, 360, 1.2


def write_clip(path: Path, seed: int) -> None:
    """10 s of moving texture (a drifting sinusoidal pattern over noise), H.264 at its default quality."""
    import av

    noise = np.random.default_rng(seed).integers(0, 60, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS, options={"preset": "veryfast"})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for index in range(SECONDS * FPS):
            wave = 0.5 + 0.5 * np.sin((x + 4 * index) / 23.0 + seed) * np.cos((y - 3 * index) / 17.0)
            image = (wave[..., None] * np.array([180, 140, 100]) + noise).clip(0, 255).astype(np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())  # the frames the encoder still holds


def clips_of(cache_dir: Path, count: int) -> list[Clip]:
    """`count` synthetic clip files, written once."""
    folder = cache_dir / f"clips_{WIDTH}x{HEIGHT}_{FPS}fps"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"clip{index:04d}.mp4" for index in range(count)]
    for seed, path in enumerate(paths):
        if not path.exists():
            write_clip(path, seed)
    return [Clip(path.stem, ClipVideo(path)) for path in paths]


def measure(name: str, clips: list[Clip], args: argparse.Namespace, folder: Path) -> str:
    """The table row of one encoder, and its verdict."""
    save, base, tiny = ENCODERS[name]
    save(folder, tiny if args.quick else base)
    dtype = torch.bfloat16 if args.device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    spec = encoder_spec(AutoConfig.from_pretrained(folder), None, name)
    preparer = ClipPreparer.load(spec, str(folder), {})
    encoder = Encoder.load(spec, str(folder), {}, args.device, dtype)
    encoder.probe(preparer, name)
    workers = max(default_num_workers(), 1)

    def loader(num_workers: int):
        return make_loader(clips, frame_sampling(DEFAULT_SAMPLING_FLAGS, spec), preparer, num_workers=num_workers,
                           batch_size=args.per_device_batch_size, pin_memory=args.device.type == "cuda")

    decoded = list(loader(0))
    encode_clips(encoder, decoded, None, lambda count: None)  # warm-up: the model's first calls
    runs = {
        "decode": lambda: list(loader(workers)),
        "encode": lambda: [encoder(batch.inputs) for batch in decoded],
        "serial": lambda: encode_clips(encoder, loader(0), None, lambda count: None),
        "overlapped": lambda: encode_clips(encoder, loader(workers), None, lambda count: None),
    }
    rates = dict.fromkeys(runs, 0.0)
    for _ in range(args.repeats):  # in turns: a busy moment of the machine falls on all alike
        rates = {key: max(rates[key], len(clips) / quick.best_seconds(run)) for key, run in runs.items()}
    ratio = rates["encode"] / rates["overlapped"]
    parameters = sum(parameter.numel() for parameter in encoder.model.parameters())
    print(f"| {name} ({str(dtype).removeprefix('torch.')}) | {parameters / 1e6:.0f}M | {decoded[0].num_frames[0]} | "
          f"{rates['decode']:.2f} ({workers}) | {rates['encode']:.2f} | {rates['serial']:.2f} | "
          f"{rates['overlapped']:.2f} | {ratio:.2f}x |")
    judged = "ok" if ratio <= GOAL else f"MISSED: the decoder holds the encoder back (> {GOAL}x)"
    return f"{name}: overlapped takes {ratio:.2f}x the time of encode alone: {quick.verdict(args, judged)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=torch.device, default="cpu", help="cpu, cuda or cuda:N (bf16 on CUDA)")
    parser.add_argument("--encoders", nargs="+", choices=tuple(ENCODERS), default=list(ENCODERS))
    parser.add_argument("--num_clips", type=int, default=8, help="Clips per measurement.")
    parser.add_argument("--per_device_batch_size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="Rounds of measurements; the best of each is kept.")
    parser.add_argument("--cache_dir", type=Path, default=Path.home() / ".cache" / "fiberbench" / "bench_features",
                        help="Where the synthetic clips are written once.")
    args = quick.parse_args(parser, num_clips=2, per_device_batch_size=2, repeats=1)
    clips = clips_of(args.cache_dir, args.num_clips)
    print(f"clips/s on {args.device}\n| encoder | params | frames/clip | decode (workers) | encode | serial | "
          f"overlapped | encode / overlapped time |\n|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as models:
        verdicts = [measure(name, clips, args, Path(models) / name) for name in args.encoders]
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
