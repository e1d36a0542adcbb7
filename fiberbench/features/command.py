"""`fiberbench extract-features`: the video features of every clip, from its video, with any current encoder.

    fiberbench extract-features --video_dir videos --model_name_or_path openai/clip-vit-large-patch14 \\
        --data_dir release --output_dir features/clip-vit-large-patch14
    fiberbench build-dataset --data_dir release --features_dir features/clip-vit-large-patch14 --output_dir my_fiber

For each clip (of a dataset's splits, or each video of the folder) the frames of its window are
decoded with PyAV as `fiberbench predict` decodes them (`fiberbench.videos`), encoded
(`encoders`), and written as `{clip_id}.npy`, float32 of shape (1, T, D): VaTeX's I3D layout, which
`build-dataset --features_dir` reads, with `features.json` naming the encoder, its output, the
sampling and D (`fiberbench.data.fiber.features_info`). Everything that can refuse the run is
checked first: the flags, the model's config (a vision tower), the output folder (`folder`), every
clip's video (`clips`); then the weights are loaded and each process (several under `accelerate
launch`) encodes its share of the clips not done yet, with data loader workers decoding ahead.
"""

import argparse
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.cli import default_num_workers, non_negative_int, positive_float, positive_int
from fiberbench.errors import DataError, UsageError
from fiberbench.models import add_model_arguments

if TYPE_CHECKING:
    from fiberbench.data.fiber.features_info import FeaturesInfo
    from fiberbench.videos import FrameSampling

    from .clips import Clip
    from .encoders import ClipPreparer, Encoder

logger = logging.getLogger(__name__)

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
    data.add_argument(
        "--video_dir",
        type=Path,
        required=True,
        help="The videos: VIDEO_ID_START_END.mp4 (clip ids) or whole VIDEO_ID.mp4 (or .mkv, .webm).",
    )
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
    output.add_argument("--output_dir", type=Path, required=True, help="The features folder to write (or resume).")
    output.add_argument(
        "--overwrite_output_dir",
        action="store_true",
        help="Replace a features folder of other settings (its files are removed first) instead of resuming.",
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

    from .encoders import IMAGE

    default = FrameSampling(fps=DEFAULT_FPS) if spec.kind == IMAGE else FrameSampling(num_frames=spec.window_frames)
    return choose_sampling(args.num_frames, args.fps, args.max_frames, default)


def sampling_record(sampling) -> dict:
    """The `sampling` section of `features.json`."""
    return {
        "num_frames": sampling.num_frames,
        "fps": sampling.fps,
        "max_frames": sampling.max_frames,
        "rule": sampling.rule(),
    }


def local_inputs(args) -> list:
    """The local files and folders the run reads, which its output must not be or hold."""
    paths = [args.model_name_or_path, args.dataset_name, args.data_dir, args.video_dir]
    return [path for path in paths if path is not None and Path(path).expanduser().exists()]


@dataclass
class Plan:
    """What a run encodes and how, once every check that could refuse it has passed."""

    info: "FeaturesInfo"  # the features' settings and D
    clips: "list[Clip]"  # every clip, in order
    done: set[str]  # the clips whose features an earlier run wrote
    pending: "list[Clip]"  # the clips to encode, their videos checked
    preparer: "ClipPreparer"
    encoder: "Encoder"  # loaded, and run once (`Encoder.probe`)
    sampling: "FrameSampling"


def run(args) -> int:
    import dataclasses

    from accelerate import Accelerator

    import fiberbench
    from fiberbench.data.fiber.features_info import FeaturesInfo
    from fiberbench.models import inference_dtype, load_config, local_or_hub, locate_model, model_commit, model_files
    from fiberbench.ownership import arguments_of

    from .clips import check_videos, dataset_clips, dataset_keys, folder_clips
    from .encoders import ClipPreparer, Encoder, encoder_spec
    from .folder import FeaturesFolder

    check_flags(args)
    source = locate_model(args.model_name_or_path, args.revision, args.trust_remote_code)
    config = load_config(source)
    spec = encoder_spec(config, args.pooling, args.model_name_or_path)
    sampling = frame_sampling(args, spec)
    name = args.features_name or default_features_name(args.model_name_or_path)
    if args.dataset_name is not None or args.data_dir is not None:
        clips = dataset_clips(dataset_keys(args.dataset_name, args.data_dir, args.split), args.video_dir)
    else:
        clips = folder_clips(args.video_dir)
    if not clips:
        raise DataError("No clips to encode: the splits chosen are empty")

    accelerator = Accelerator()  # under `accelerate launch`, its processes (with ACCELERATE_USE_CPU=1, on CPU)
    dtype = inference_dtype(accelerator.device)
    info = FeaturesInfo(
        name=name,
        feature_size=0,  # D, known once the model has run (`Encoder.probe`): not one of the settings compared
        encoder={
            "name_or_path": local_or_hub(args.model_name_or_path),
            "revision": args.revision,
            "commit": model_commit(source),
            # A local folder's files (a Hub model's are its commit's): re-saved weights are other features.
            "files": model_files(args.model_name_or_path),
            "model_type": config.model_type,
            "architectures": config.architectures,
            "kind": spec.kind,
            "dtype": str(dtype).removeprefix("torch."),
        },
        output=spec.describe(),
        sampling=sampling_record(sampling),
        fiberbench_version=fiberbench.__version__,
    )
    folder = FeaturesFolder(args.output_dir, args.overwrite_output_dir)
    folder.check(local_inputs(args), info.settings())
    loading = source.loading()
    preparer = ClipPreparer.load(spec, args.model_name_or_path, loading)
    done = folder.done([clip.name for clip in clips])
    pending = check_videos(
        [clip for clip in clips if clip.name not in done], sampling, args.skip_missing_videos, args.video_dir
    )
    encoder = Encoder.load(spec, args.model_name_or_path, loading, accelerator.device, dtype)
    feature_size = encoder.probe(preparer, args.model_name_or_path)
    if folder.previous is not None and folder.previous.feature_size != feature_size:
        raise DataError(
            f"--output_dir {folder.path}: its features have D = {folder.previous.feature_size}, but "
            f"{args.model_name_or_path} now gives {feature_size} (its weights changed?); pass --overwrite_output_dir"
        )
    info = dataclasses.replace(info, feature_size=feature_size)
    plan = Plan(info, clips, done, pending, preparer, encoder, sampling)

    def claim(previous) -> None:
        folder.claim(previous, [clip.name for clip in clips if clip.video is not None], arguments_of(args))
        folder.write_info(info)  # before any clip

    with folder.output.open(
        local_inputs(args),
        resume=True,
        accelerator=accelerator,
        recheck=lambda previous: folder.check_record(previous, info.settings()),
        claim=claim,
    ):
        extract(args, accelerator, folder, plan)
    return 0


def extract(args, accelerator, folder, plan: Plan) -> None:
    """With the output opened (checked, locked, claimed): encode this process's share of the clips."""
    import os

    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    from .extraction import encode_clips, make_loader

    clips, done, pending, info = plan.clips, plan.done, plan.pending, plan.info
    if accelerator.is_main_process:
        skipped = len(clips) - len(pending) - len(done)
        logger.info(
            "%s: %d of %d clips already done, %d to encode%s; %s, D = %d",
            folder.path,
            len(done),
            len(clips),
            len(pending),
            f", {skipped} skipped for a missing video" if skipped else "",
            info.describe(),
            info.feature_size,
        )

    shard = pending[accelerator.process_index :: accelerator.num_processes]
    processes_here = int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))
    loader = make_loader(
        shard,
        plan.sampling,
        plan.preparer,
        batch_size=args.per_device_batch_size,
        num_workers=default_num_workers(processes_here)
        if args.dataloader_num_workers is None
        else args.dataloader_num_workers,
        pin_memory=accelerator.device.type == "cuda",
    )
    with tqdm(
        total=len(shard),
        unit="clip",
        desc=f"Encoding (process {accelerator.process_index + 1} of {accelerator.num_processes})",
        disable=not accelerator.is_local_main_process,
    ) as progress:
        written = encode_clips(plan.encoder, loader, folder.write, progress.update)
    logger.info("Process %d of %d: encoded %d clips", accelerator.process_index + 1, accelerator.num_processes, written)
    encoded = sum(gather_object([written]))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        missing = [clip.name for clip in clips if clip.video is None and clip.name not in done]
        output = {"clips": len(clips), "encoded": encoded, "already_done": len(done), "skipped_missing_videos": missing}
        folder.finish(output)
        logger.info(
            "Wrote the features of %d clips to %s (%d encoded by this run)",
            len(clips) - len(missing),
            folder.path,
            encoded,
        )
