"""`fiberbench extract-features`: the video features of every clip, from its video, with any current encoder.

All that can refuse the run is checked first; then each process (several under `accelerate launch`) encodes its
share of the clips not written yet. The folder's record lists every file before it is written: a killed run is
resumed by the same command.
"""

import argparse
import contextlib
import dataclasses
import logging
import os
from pathlib import Path

from accelerate import Accelerator
from accelerate.utils import gather_object
from tqdm.auto import tqdm

import fiberbench
from fiberbench.cli import default_num_workers
from fiberbench.errors import DataError, UsageError, alike_on_every_process
from fiberbench.model_config import inference_dtype, load_config
from fiberbench.outputs import check_output, finish_output, output_lock, record_path, start_output, write_json
from fiberbench.records import KEY_FIELDS, VIDEO_ID_PATTERN, clip_id, clip_key, read_release_records
from fiberbench.videos import VIDEO_EXTENSIONS, Clip, ClipVideo, FrameSampling, check_clip_videos, choose_sampling
from fiberbench.videos import find_clip_video

from ..fiber.features_info import FEATURES_INFO_FILE, FeaturesInfo
from ..fiber.release import SPLIT_FILES
from ..loading import load_fiber
from .arguments import DEFAULT_FPS
from .encoders import IMAGE, ClipPreparer, Encoder, encode_clips, encoder_spec, make_loader

logger = logging.getLogger(__name__)

COMMAND = "fiberbench extract-features"


def frame_sampling(args: argparse.Namespace, spec) -> FrameSampling:
    """The frames of each clip, by the one rule of `fiberbench.videos.choose_sampling`: --num_frames, else --fps (with
    --max_frames), else the encoder's default (`DEFAULT_FPS` for image encoders, one window for video encoders)."""
    default = FrameSampling(fps=DEFAULT_FPS) if spec.kind == IMAGE else FrameSampling(num_frames=spec.window_frames)
    return choose_sampling(args.num_frames, args.fps, args.max_frames, default)


def dataset_clips(dataset_name: str | None, data_dir: Path | None, splits: list[str] | None,
                  video_dir: Path) -> list[Clip]:
    """The distinct clips of the `splits` (all when None) of a built dataset or a release folder, with their videos."""
    if data_dir is not None:
        files = {split: data_dir / name for split, name in SPLIT_FILES.items() if (data_dir / name).is_file()}
        if not files:
            raise DataError(f"--data_dir {data_dir}: holds none of {', '.join(SPLIT_FILES.values())}")
        described, available = f"--data_dir {data_dir}", list(files)
    else:
        dataset = load_fiber(dataset_name, "text")
        described, available = f"--dataset_name {dataset_name}", list(dataset)
    if unknown := [split for split in splits or [] if split not in available]:
        raise UsageError(f"--split {unknown[0]}: {described} has no such split (it has: {', '.join(available)})")
    keys = []
    for split in dict.fromkeys(splits or available):
        if data_dir is not None:
            keys += map(clip_key, read_release_records(files[split]))
        else:
            keys += zip(*(dataset[split][field] for field in KEY_FIELDS))
    return [Clip(clip_id(*key), find_clip_video(video_dir, *key), key) for key in dict.fromkeys(keys)]


def folder_clips(video_dir: Path) -> list[Clip]:
    """Every video file of `video_dir`, whole, named by its file name without extension."""
    files = sorted(path for path in video_dir.iterdir() if path.suffix in VIDEO_EXTENSIONS and path.is_file())
    if not files:
        raise DataError(f"--video_dir {video_dir}: holds no video ({', '.join(VIDEO_EXTENSIONS)})")
    clips = {}
    for path in files:
        if not VIDEO_ID_PATTERN.fullmatch(path.stem):
            problem = "its name is not a plain id (only A-Z, a-z, 0-9, '_' and '-'): it names its features"
            raise DataError(f"{path}: {problem}")
        if path.stem in clips:
            raise DataError(f"{clips[path.stem].video.path} and {path} would both be {path.stem}.npy: keep one")
        clips[path.stem] = Clip(path.stem, ClipVideo(path))
    return list(clips.values())


def run(args: argparse.Namespace) -> int:
    accelerator = Accelerator()  # under `accelerate launch`, its processes (with ACCELERATE_USE_CPU=1, on CPU)
    main, output_dir = accelerator.is_main_process, args.output_dir
    source = args.model_source  # located by `arguments.check`, as the CLI ran it
    with alike_on_every_process():
        config = load_config(source)
        spec = encoder_spec(config, args.pooling, args.model_name_or_path)
        sampling = frame_sampling(args, spec)
        clips = (folder_clips(args.video_dir) if args.dataset_name is None and args.data_dir is None
                 else dataset_clips(args.dataset_name, args.data_dir, args.split, args.video_dir))
        if not clips:
            raise DataError("No clips to encode: the splits chosen are empty")
    dtype = inference_dtype(accelerator.device)
    info = FeaturesInfo(
        name=args.features_name,
        feature_size=0,  # D, known once the model has run (`Encoder.probe`): not one of the settings compared
        encoder={**source.describe(), "model_type": config.model_type, "architectures": config.architectures,
                 "kind": spec.kind, "dtype": str(dtype).removeprefix("torch.")},
        output=spec.describe(),
        sampling=dataclasses.asdict(sampling) | {"rule": sampling.rule()},
        fiberbench_version=fiberbench.__version__,
    )
    inputs = [args.model_name_or_path, args.dataset_name, args.data_dir, args.video_dir]
    inputs = [path for path in inputs if path is not None and Path(path).expanduser().exists()]
    with output_lock(output_dir, "--output_dir") if main else contextlib.nullcontext(), alike_on_every_process():
        previous = check_output(output_dir, command=COMMAND, flag="--output_dir", overwrite=args.overwrite_output_dir,
                                folder=True, inputs=inputs, resume=True)
        earlier = None  # the features of an earlier run to resume: of the same settings
        if previous and not args.overwrite_output_dir and (output_dir / FEATURES_INFO_FILE).exists():
            earlier = FeaturesInfo.read(output_dir)
            wanted, found = info.settings(), earlier.settings()
            if differ := sorted(key for key in wanted.keys() | found.keys() if wanted.get(key) != found.get(key)):
                problem = f"holds features made with other settings ({', '.join(differ)})"
                raise UsageError(f"--output_dir {output_dir} {problem}; pass --overwrite_output_dir to replace them, "
                                 "or choose another folder")
        done = {clip.name for clip in clips if earlier and (output_dir / f"{clip.name}.npy").is_file()}
        # Each video opened and checked for the sampling; a missing one refused, or skipped with --skip_missing_videos.
        pending = [clip for clip in clips if clip.name not in done]
        check_clip_videos(pending, sampling, args.video_dir, args.skip_missing_videos, skipped="skipped",
                          skipping="encode the others (the skipped ones are counted)",
                          unusable_advice="replace or remove them (with --skip_missing_videos a removed one is "
                          "skipped)")
        pending = [clip for clip in pending if clip.video is not None]
        preparer = ClipPreparer.load(spec, args.model_name_or_path, source.loading())
        encoder = Encoder.load(spec, args.model_name_or_path, source.loading(), accelerator.device, dtype)
        info = dataclasses.replace(info, feature_size=encoder.probe(preparer, args.model_name_or_path))
        accelerator.wait_for_everyone()  # every process has checked the folder as the earlier run left it
        if main:
            record = start_output(output_dir, COMMAND, previous, folder=True, resume=not args.overwrite_output_dir)
            # Every file this run may write is listed before it is written: a killed run's folder is resumed.
            planned = [FEATURES_INFO_FILE, *(f"{clip.name}.npy" for clip in clips if clip.video is not None)]
            record["files"] = sorted({*record["files"], *planned})
            write_json(record_path(output_dir, folder=True), record)
            write_json(output_dir / FEATURES_INFO_FILE, info.to_json())
            skipped = len(clips) - len(pending) - len(done)
            logger.info("%s: %d of %d clips already done, %d to encode%s; %s, D = %d", output_dir, len(done),
                        len(clips), len(pending), f", {skipped} skipped for a missing video" if skipped else "",
                        info.describe(), info.feature_size)
        accelerator.wait_for_everyone()
        shard = pending[accelerator.process_index :: accelerator.num_processes]
        workers = args.dataloader_num_workers
        if workers is None:  # a share of this machine's cores for each of its processes
            workers = default_num_workers(int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes)))
        loader = make_loader(shard, sampling, preparer, batch_size=args.per_device_batch_size, num_workers=workers,
                             pin_memory=accelerator.device.type == "cuda")
        process = f"process {accelerator.process_index + 1} of {accelerator.num_processes}"
        with tqdm(total=len(shard), unit="clip", desc=f"Encoding ({process})", disable=None) as progress:
            written = encode_clips(encoder, loader, output_dir, progress.update)
        logger.info("%s: encoded %d clips", process.capitalize(), written)
        encoded = sum(gather_object([written]))
        accelerator.wait_for_everyone()
        if main:
            missing = [clip.name for clip in clips if clip.video is None and clip.name not in done]
            output = {"clips": len(clips), "encoded": encoded, "already_done": len(done)}
            finish_output(output_dir, record, output=output | {"missing_clips": missing})
            logger.info("Wrote the features of %d clips to %s (%d encoded now)", len(clips) - len(missing), output_dir,
                        encoded)
    return 0
