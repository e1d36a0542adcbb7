"""`fiberbench extract-features`: the video features of every clip, from its video, with any current encoder.

    fiberbench extract-features --video_dir videos --model_name_or_path openai/clip-vit-large-patch14 \\
        --data_dir release --output_dir features/clip-vit-large-patch14
    fiberbench build-dataset --data_dir release --features_dir features/clip-vit-large-patch14 --output_dir my_fiber

For each clip (of a dataset's splits, or each video of the folder) the frames of its window are
decoded with PyAV as `fiberbench predict` decodes them (`fiberbench.videos`), encoded
(`encoders`), and written as `{clip_id}.npy`, float32 of shape (1, T, D): VaTeX's I3D layout, which
`build-dataset --features_dir` reads, with `features.json` naming the encoder, its output, the
sampling and D (`fiberbench.data.fiber.features_info`). Everything that can refuse the run is
checked first: the flags (`arguments`), the model's config (a vision tower), the output folder (`folder`), every
clip's video (`clips`); then the weights are loaded and each process (several under `accelerate
launch`) encodes its share of the clips not done yet, with data loader workers decoding ahead.
"""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.cli import default_num_workers
from fiberbench.collector import collector_held_off
from fiberbench.errors import DataError

from fiberbench.data.features.arguments import add_arguments, check_flags, default_features_name, frame_sampling

if TYPE_CHECKING:
    from fiberbench.data.fiber.features_info import FeaturesInfo
    from fiberbench.videos import FrameSampling

    from fiberbench.data.features.clips import Clip
    from fiberbench.data.features.encoders import ClipPreparer, Encoder

__all__ = ["add_arguments", "run"]

logger = logging.getLogger(__name__)


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

    with collector_held_off():
        from accelerate import Accelerator

        import fiberbench
        from fiberbench.data.fiber.features_info import FeaturesInfo
        from fiberbench.models import (
            inference_dtype,
            load_config,
            local_or_hub,
            locate_model,
            model_commit,
            model_files,
        )
        from fiberbench.ownership import arguments_of

        from fiberbench.data.features.clips import check_videos, dataset_clips, dataset_keys, folder_clips
        from fiberbench.data.features.encoders import ClipPreparer, Encoder, encoder_spec
        from fiberbench.data.features.folder import FeaturesFolder

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
    with collector_held_off():
        preparer = ClipPreparer.load(spec, args.model_name_or_path, loading)
    done = folder.done([clip.name for clip in clips])
    pending = check_videos(
        [clip for clip in clips if clip.name not in done], sampling, args.skip_missing_videos, args.video_dir
    )
    with collector_held_off():
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

    from fiberbench.data.features.extraction import encode_clips, make_loader

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
