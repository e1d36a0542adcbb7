"""`fiberbench extract-features`'s flags (`add_arguments`) and the checks that need neither torch nor the data
(`check`): the CLI runs them before the command's module loads torch and transformers, so that a mistyped folder or
an unreachable Hub is one line in a second, and `fiberbench extract-features --help` is quick."""

import argparse
import re
from pathlib import Path

from fiberbench.cli import add_output_arguments, add_video_dir_argument, non_negative_int, positive_float, positive_int
from fiberbench.errors import DataError, UsageError
from fiberbench.models import add_model_arguments, locate_model

from ..fiber.features_info import check_config_name

DEFAULT_FPS = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "Image encoders (CLIP, SigLIP, SigLIP 2 vision towers or whole models, DINOv2, ...: AutoModel + "
        "AutoImageProcessor) give one feature per sampled frame; video encoders (VideoMAE, V-JEPA 2) one per temporal "
        "patch of windows of their own number of frames. Rerun to resume: clips already written are skipped. "
        "Data-parallel: accelerate launch --multi_gpu --num_processes N -m fiberbench.cli extract-features ..."
    )
    add_model_arguments(parser, required=True, remote_code_needed_by="the encoders transformers has")
    parser.add_argument("--pooling", choices=["pooler_output", "cls", "mean"], help="Which output is a feature: "
                        "pooler_output (image encoders' default: the pooled output, a dual encoder's "
                        "get_image_features), cls (the class token), mean (of the last hidden state's tokens; video "
                        "encoders' only).")
    add_video_dir_argument(parser, "The videos", required=True)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--dataset_name", help="A FIBER dataset folder or Hub id: encode its clips.")
    source.add_argument("--data_dir", type=Path, help="A folder of release-format train/val/test.json: their clips.")
    parser.add_argument("--split", nargs="+", help="Only these splits (default: all).")
    parser.add_argument("--skip_missing_videos", action="store_true", help="Skip (and count) clips without a video.")
    sampling = parser.add_mutually_exclusive_group()
    sampling.add_argument("--fps", type=positive_float, help=f"Frames a second (image encoders': {DEFAULT_FPS:g}).")
    sampling.add_argument("--num_frames", type=positive_int, help="Frames per clip (video encoders': one window).")
    parser.add_argument("--max_frames", type=positive_int, help="With --fps: at most this many frames.")
    add_output_arguments(parser, "The features folder to write (or resume).", "Replace a features folder of other "
                         "settings (its files are removed first) instead of resuming.", folder=True)
    parser.add_argument("--features_name", help="The dataset config they become (default: the model's name).")
    parser.add_argument("--per_device_batch_size", type=positive_int, default=8, help="Clips per encoder call.")
    parser.add_argument("--dataloader_num_workers", type=non_negative_int, help="Processes decoding ahead (default: "
                        "a share of the CPU cores; 0: in the process itself).")


def check(args: argparse.Namespace) -> argparse.Namespace:
    """The flag values on their own and the name the features get, then the model's folder or Hub id: a `UsageError`
    or `DataError` naming the flag. Returns the arguments with that name (`features_name`, by default the model's) and
    the located model (`model_source`)."""
    if args.max_frames is not None and args.fps is None:
        raise UsageError("--max_frames caps --fps sampling; with --num_frames the number is fixed")
    if args.split is not None and args.dataset_name is None and args.data_dir is None:
        raise UsageError("--split chooses splits of --dataset_name or --data_dir; without them every video is encoded")
    for flag, folder in (("--video_dir", args.video_dir), ("--data_dir", args.data_dir)):
        if folder is not None and not folder.is_dir():
            raise DataError(f"{flag} {folder}: {'not a folder' if folder.exists() else 'no such folder'}")
    if args.features_name is not None and (problem := check_config_name(args.features_name)):
        raise UsageError(f"--features_name: {problem}")
    name = args.features_name or default_features_name(args.model_name_or_path)
    source = locate_model(args.model_name_or_path, args.revision, args.trust_remote_code)
    return argparse.Namespace(**vars(args) | {"features_name": name}, model_source=source)


def default_features_name(model_name_or_path: str) -> str:
    """The model's name (a Hub id's or folder's last part) as a config name: lower-case, others characters as '-'."""
    name = re.sub(r"[^a-z0-9_-]+", "-", Path(model_name_or_path.rstrip("/")).name.lower()).strip("-_")
    if problem := check_config_name(name):
        raise UsageError(f"--model_name_or_path {model_name_or_path} (give --features_name): {problem}")
    return name
