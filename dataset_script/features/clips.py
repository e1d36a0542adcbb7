"""The clips `fiberbench extract-features` encodes, with their videos: a dataset's clips, or every video of a folder.

- With --dataset_name (a built FIBER folder or Hub id) or --data_dir (release-format JSON files),
  each distinct clip of the chosen splits, in order; its features file is named by its clip id
  (`{video_id}_{start:06d}_{end:06d}`), its video found in --video_dir as `fiberbench predict` finds
  it (`fiberbench.videos.find_clip_video`): the clip's own file, or the whole video cut.
- Otherwise every video file of --video_dir, whole, named by its file name without extension.

Every clip's video is opened before any work (`check_videos`): a missing one is an error naming it
(or, with --skip_missing_videos, skipped and counted), and so is one that cannot be decoded, has no
frame in the clip's times (or ends before the clip does), has a header whose duration disagrees with
its frames, is shorter than one frame, or has fewer frames than a fixed number asked.
"""

from pathlib import Path

from fiberbench.records import VIDEO_ID_PATTERN, ClipKey, clip_id
from fiberbench.errors import DataError, UsageError
from fiberbench.videos import VIDEO_EXTENSIONS, Clip, ClipVideo, FrameSampling, check_clip_videos, find_clip_video


def dataset_keys(dataset_name: str | None, data_dir: Path | None, splits: list[str] | None) -> list[ClipKey]:
    """The distinct clips of the chosen `splits` (all when None), in order, of a built dataset or a release folder."""
    if data_dir is not None:
        from fiberbench.data.fiber.release import SPLIT_FILES
        from fiberbench.records import clip_key, read_release_records

        available = {split: data_dir / name for split, name in SPLIT_FILES.items()}
        files = {split: path for split, path in available.items() if path.is_file()}
        if not files:
            raise DataError(f"--data_dir {data_dir}: holds none of {', '.join(SPLIT_FILES.values())}")
        chosen = _chosen_splits(splits, list(files), f"--data_dir {data_dir}")
        records = (record for split in chosen for record in read_release_records(files[split]))
        return list(dict.fromkeys(clip_key(record) for record in records))
    from fiberbench.data import load_fiber

    dataset = load_fiber(dataset_name, "text")
    chosen = _chosen_splits(splits, list(dataset), f"--dataset_name {dataset_name}")
    keys = []
    for split in chosen:
        columns = dataset[split].select_columns(["video_id", "video_start_time", "video_end_time"])
        keys += zip(columns["video_id"], columns["video_start_time"], columns["video_end_time"])
    return list(dict.fromkeys(keys))


def _chosen_splits(splits: list[str] | None, available: list[str], described: str) -> list[str]:
    if splits is None:
        return available
    unknown = [split for split in splits if split not in available]
    if unknown:
        raise UsageError(f"--split {unknown[0]}: {described} has no such split (it has: {', '.join(available)})")
    return list(dict.fromkeys(splits))


def dataset_clips(keys: list[ClipKey], video_dir: Path) -> list[Clip]:
    """Each clip of `keys`, named by its clip id, with its video in `video_dir` (None where there is none)."""
    return [Clip(clip_id(*key), find_clip_video(video_dir, *key), key) for key in keys]


def folder_clips(video_dir: Path) -> list[Clip]:
    """Every video file of `video_dir` (.mp4, .mkv, .webm), whole, named by its file name without extension.

    Raises:
        DataError: the folder has no video, a name is not a plain id, or two files have one name.
    """
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


def check_videos(clips: list[Clip], sampling: FrameSampling, skip_missing: bool, video_dir: Path) -> list[Clip]:
    """The clips to encode: those with a video, every one checked for `sampling` (`check_clip_videos`); a missing one
    is refused, or skipped (and counted) with `skip_missing`."""
    check_clip_videos(
        clips,
        sampling,
        video_dir,
        skip_missing,
        skipping="encode the others (the skipped ones are counted)",
        skipped="skipped",
        unusable_advice="replace or remove them (with --skip_missing_videos a removed one is skipped)",
    )
    return [clip for clip in clips if clip.video is not None]
