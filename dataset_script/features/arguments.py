"""`fiberbench extract-features`'s flags (`add_arguments`), their checks, and what they decide before any model is read.

The features' name (`default_features_name`: the model's) and the frames of each clip
(`frame_sampling`: the one rule of `fiberbench.videos.choose_sampling`, with the encoder's default).
"""

import argparse
import re
from pathlib import Path

from fiberbench.cli import (
    add_output_arguments,
    add_video_dir_argument,
    non_negative_int,
    positive_float,
    positive_int,
)
from fiberbench.errors import DataError, UsageError
from fiberbench.models import add_model_arguments


DEFAULT_FPS = 1.0


DEFAULT_BATCH_SIZE = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Image encoders (CLIP, SigLIP, SigLIP 2 vision towers or whole models, DINOv2, ...: AutoModel + "
        "AutoImageProcessor) give one feature per sampled frame; video encoders (VideoMAE, V-JEPA 2) one per temporal "
        "patch of windows of their own number of frames. Rerun to resume: clips already written are skipped. "
        "Data-parallel: accelerate launch --multi_gpu --num_processes N -m fiberbench.cli extract-features ..."
    )
    model = parser.add_argument_group("encoder")
    add_model_arguments(model, required=True, remote_code_needed_by="the encoders transformers has")
    model.add_argument(
        "--pooling",
        choices=["pooler_output", "cls", "mean"],
        default=None,
        help="Which output is a feature: pooler_output (image encoders' default: the pooled output, a dual encoder's "
        "get_image_features), cls (the class token), mean (of the last hidden state's tokens; video encoders' only "
        "one, per temporal patch).",
    )
    data = parser.add_argument_group("clips")
    add_video_dir_argument(data, "The videos", required=True)
    source = data.add_mutually_exclusive_group()
    source.add_argument("--dataset_name", default=None, help="A FIBER dataset folder or Hub id: encode its clips.")
    source.add_argument(
        "--data_dir",
        type=Path,
        default=None,
        help="A folder of release-format train.json, val.json "
        "and test.json (as build-dataset reads): encode their clips.",
    )
    data.add_argument("--split", nargs="+", default=None, help="Only these splits (default: all).")
    data.add_argument(
        "--skip_missing_videos",
        action="store_true",
        help="Skip clips without a video (counted in the log and the folder's record) instead of stopping.",
    )
    sampling = data.add_mutually_exclusive_group()
    sampling.add_argument(
        "--fps",
        type=positive_float,
        default=None,
        help=f"Frames per second of clip, spread uniformly (image encoders' default: {DEFAULT_FPS:g}).",
    )
    sampling.add_argument(
        "--num_frames",
        type=positive_int,
        default=None,
        help="Frames per clip, spread uniformly (video encoders' "
        "default: one window, the model's own number of frames).",
    )
    data.add_argument("--max_frames", type=positive_int, default=None, help="With --fps: at most this many frames.")
    output = parser.add_argument_group("output")
    add_output_arguments(
        output,
        "The features folder to write (or resume).",
        "Replace a features folder of other settings (its files are removed first) instead of resuming.",
        folder=True,
    )
    output.add_argument(
        "--features_name",
        default=None,
        help="The dataset config the features become in build-dataset (default: the "
        "model's name, e.g. clip-vit-large-patch14).",
    )
    run_group = parser.add_argument_group("speed")
    run_group.add_argument(
        "--per_device_batch_size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        help=f"Clips per encoder call and process (default {DEFAULT_BATCH_SIZE}).",
    )
    run_group.add_argument(
        "--dataloader_num_workers",
        type=non_negative_int,
        default=None,
        help="Processes decoding clips ahead of the encoder, per process (default: its share of the CPU cores, less "
        "one; 0 decodes in the process itself).",
    )


def check_flags(args) -> None:
    """The flag values on their own, before anything is loaded."""
    if args.max_frames is not None and args.fps is None:
        raise UsageError("--max_frames caps --fps sampling; with --num_frames the number is fixed")
    if args.split is not None and args.dataset_name is None and args.data_dir is None:
        raise UsageError("--split chooses splits of --dataset_name or --data_dir; without them every video is encoded")
    if args.video_dir.exists() and not args.video_dir.is_dir():
        raise UsageError(f"--video_dir {args.video_dir} is a file; give the folder of the videos")
    if not args.video_dir.is_dir():
        raise DataError(f"--video_dir {args.video_dir}: no such folder")
    if args.data_dir is not None and not args.data_dir.is_dir():
        raise DataError(f"--data_dir {args.data_dir}: no such folder")
    if args.features_name is not None:
        check_features_name(args.features_name, "--features_name")


def check_features_name(name: str, where: str) -> None:
    from fiberbench.data.fiber.features_info import check_config_name

    problem = check_config_name(name)
    if problem is not None:
        raise UsageError(f"{where}: {problem}")


def default_features_name(model_name_or_path: str) -> str:
    """The config name of the features: the model's name (a Hub id's or folder's last part), lower-cased, with any
    other character than letters, digits, '_' and '-' as '-'."""
    last = Path(model_name_or_path.rstrip("/")).name.lower()
    name = re.sub(r"[^a-z0-9_-]+", "-", last).strip("-_")
    check_features_name(name, f"--model_name_or_path {model_name_or_path} (give --features_name)")
    return name


def frame_sampling(args, spec):
    """The frames of each clip, by the one rule (`fiberbench.videos.choose_sampling`): --num_frames, else --fps (with
    --max_frames), else the encoder's default: `DEFAULT_FPS` frames a second for image encoders, one window for video
    encoders."""
    from fiberbench.videos import FrameSampling, choose_sampling

    from fiberbench.data.features.encoders import IMAGE

    default = FrameSampling(fps=DEFAULT_FPS) if spec.kind == IMAGE else FrameSampling(num_frames=spec.window_frames)
    return choose_sampling(args.num_frames, args.fps, args.max_frames, default)
