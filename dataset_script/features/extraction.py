"""The clips `fiberbench extract-features` encodes, and their decoding overlapped with encoding.

- With --dataset_name (a built FIBER folder or Hub id) or --data_dir (release-format JSON files),
  each distinct clip of the chosen splits, in order, named by its clip id
  (`{video_id}_{start:06d}_{end:06d}`), its video found in --video_dir as `fiberbench predict` finds
  it (`fiberbench.videos.find_clip_video`): the clip's own file, or the whole video cut.
- Otherwise every video file of --video_dir, whole, named by its file name without extension.

`DecodedClips` is a PyTorch dataset whose items are the clips' model inputs (frames sampled with
PyAV, then `ClipPreparer`); a `DataLoader` over it with workers keeps batches coming while
`encode_clips` runs the encoder on the one before. A video that fails while decoding is an item
carrying its error, raised in the main process as one line.
"""

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fiberbench.errors import DataError, UsageError
from fiberbench.outputs import atomic_path
from fiberbench.records import VIDEO_ID_PATTERN, clip_id, clip_key, read_release_records
from fiberbench.videos import VIDEO_EXTENSIONS, Clip, ClipVideo, FrameSampling, check_clip_videos, find_clip_video
from fiberbench.videos import sample_frames

from ..fiber.release import SPLIT_FILES
from ..loading import load_fiber
from .encoders import ClipPreparer, Encoder


def dataset_clips(
    dataset_name: str | None, data_dir: Path | None, splits: list[str] | None, video_dir: Path
) -> list[Clip]:
    """The distinct clips of the chosen `splits` (all when None), in order, of a built dataset or a release folder,
    each named by its clip id, with its video in `video_dir` (None where there is none)."""
    if data_dir is not None:
        files = {split: data_dir / name for split, name in SPLIT_FILES.items() if (data_dir / name).is_file()}
        if not files:
            raise DataError(f"--data_dir {data_dir}: holds none of {', '.join(SPLIT_FILES.values())}")
        chosen = _chosen_splits(splits, list(files), f"--data_dir {data_dir}")
        keys = [clip_key(record) for split in chosen for record in read_release_records(files[split])]
    else:
        dataset = load_fiber(dataset_name, "text")
        chosen = _chosen_splits(splits, list(dataset), f"--dataset_name {dataset_name}")
        keys = []
        for split in chosen:
            columns = dataset[split].select_columns(["video_id", "video_start_time", "video_end_time"])
            keys += zip(columns["video_id"], columns["video_start_time"], columns["video_end_time"])
    return [Clip(clip_id(*key), find_clip_video(video_dir, *key), key) for key in dict.fromkeys(keys)]


def _chosen_splits(splits: list[str] | None, available: list[str], described: str) -> list[str]:
    unknown = [split for split in splits or [] if split not in available]
    if unknown:
        raise UsageError(f"--split {unknown[0]}: {described} has no such split (it has: {', '.join(available)})")
    return list(dict.fromkeys(splits)) if splits else available


def folder_clips(video_dir: Path) -> list[Clip]:
    """Every video file of `video_dir` (.mp4, .mkv, .webm), whole, named by its file name without extension; a
    `DataError` when there is none, a name is not a plain id, or two files have one name."""
    files = sorted(path for path in video_dir.iterdir() if path.suffix in VIDEO_EXTENSIONS and path.is_file())
    if not files:
        raise DataError(f"--video_dir {video_dir}: holds no video ({', '.join(VIDEO_EXTENSIONS)})")
    clips = {}
    for path in files:
        if not VIDEO_ID_PATTERN.fullmatch(path.stem):
            raise DataError(
                f"{path}: its name is not a plain id (only A-Z, a-z, 0-9, '_' and '-'), which names its features"
            )
        if path.stem in clips:
            raise DataError(f"{clips[path.stem].video.path} and {path} would both be {path.stem}.npy: keep one")
        clips[path.stem] = Clip(path.stem, ClipVideo(path))
    return list(clips.values())


def check_videos(clips: list[Clip], sampling: FrameSampling, args: argparse.Namespace) -> list[Clip]:
    """The clips to encode: those with a video, each opened and checked for `sampling` (`check_clip_videos`); a
    missing video is refused, or skipped (and counted) with --skip_missing_videos."""
    check_clip_videos(
        clips, sampling, args.video_dir, args.skip_missing_videos, skipped="skipped",
        skipping="encode the others (the skipped ones are counted)",
        unusable_advice="replace or remove them (with --skip_missing_videos a removed one is skipped)",
    )
    return [clip for clip in clips if clip.video is not None]


@dataclass
class PreparedClips:
    """A batch of clips' model inputs: `inputs` hold every clip's units (frames or windows) one after another."""

    names: list[str]
    num_frames: list[int]  # frames sampled per clip
    inputs: dict[str, torch.Tensor]
    error: str | None = None  # a video that could not be decoded: the batch is not encoded

    def pin_memory(self) -> "PreparedClips":
        """Page-locked inputs, for fast copies to a GPU (what a DataLoader with `pin_memory` calls)."""
        self.inputs = {name: value.pin_memory() for name, value in self.inputs.items()}
        return self


class DecodedClips(torch.utils.data.Dataset):
    """`clips` as their model inputs: each clip's frames sampled (`sampling`) and prepared (`preparer`)."""

    def __init__(self, clips: list[Clip], sampling: FrameSampling, preparer: ClipPreparer):
        self.clips, self.sampling, self.preparer = clips, sampling, preparer

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, index: int) -> PreparedClips:
        clip = self.clips[index]
        try:
            frames = sample_frames(clip.video, self.sampling).frames
        except DataError as error:
            return PreparedClips([clip.name], [0], {}, error=f"{error} (the video of clip {clip.name})")
        return PreparedClips([clip.name], [len(frames)], self.preparer(frames))


def collate(items: list[PreparedClips]) -> PreparedClips:
    """One batch of clips: their inputs concatenated along the units; the first error, if any, instead."""
    failed = next((item for item in items if item.error is not None), None)
    if failed is not None:
        return failed
    return PreparedClips(
        [name for item in items for name in item.names],
        [count for item in items for count in item.num_frames],
        {name: torch.cat([item.inputs[name] for item in items]) for name in items[0].inputs},
    )


def make_loader(
    clips: list[Clip], sampling: FrameSampling, preparer: ClipPreparer, *, batch_size: int, num_workers: int,
    pin_memory: bool = False,
) -> torch.utils.data.DataLoader:
    """Batches of `batch_size` clips in order, decoded ahead by `num_workers` processes (0: in this one)."""
    return torch.utils.data.DataLoader(
        DecodedClips(clips, sampling, preparer), batch_size=batch_size, collate_fn=collate, num_workers=num_workers,
        pin_memory=pin_memory, prefetch_factor=4 if num_workers > 0 else None,
    )


def clip_features(encoder: Encoder, batch: PreparedClips) -> Iterator[tuple[str, np.ndarray]]:
    """Encode a batch: each clip's name and features, float32 of shape (T, D); a `DataError` for a batch holding a
    video that could not be decoded."""
    if batch.error is not None:
        raise DataError(batch.error)
    spec = encoder.spec
    units = encoder(batch.inputs).cpu()  # (units, steps per unit, D)
    start = 0
    for name, num_frames in zip(batch.names, batch.num_frames):
        count = spec.units(num_frames)
        yield name, units[start : start + count].flatten(0, 1)[: spec.steps(num_frames)].numpy()
        start += count


def encode_clips(encoder: Encoder, batches, folder: Path | None, progress: Callable[[int], None]) -> int:
    """Encode every batch, writing each clip's features as it comes into `folder` (None: nowhere) as `{name}.npy`,
    float32 (1, T, D) like VaTeX's I3D files, atomically; returns how many clips were encoded."""
    encoded = 0
    for batch in batches:
        for name, features in clip_features(encoder, batch):
            if folder is not None:
                with atomic_path(folder / f"{name}.npy") as temporary, open(temporary, "wb") as file:
                    np.save(file, features[None].astype(np.float32, copy=False), allow_pickle=False)
            encoded += 1
        progress(len(batch.names))
    return encoded
