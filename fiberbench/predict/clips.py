"""The clips a run of `fiberbench predict` works on: its dataset split, each row's clip, and each clip's video.

Read before any generation, by a run and by --reread alike: a clip twice in the split, or a video
that is missing or cannot give the frames asked, is one error line before any work.
"""

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.errors import DataError

if TYPE_CHECKING:
    from fiberbench.data.fiber.validation import ClipKey
    from fiberbench.videos import ClipVideo, FrameSampling

logger = logging.getLogger(__name__)


def load_split(dataset_name: str | None, split: str, max_predict_samples: int | None, config_name: str):
    """The clips to predict: the `split` of the dataset (or of the bundled sample) in its config `config_name`, its
    first `max_predict_samples` clips (all with None)."""
    from fiberbench.data import load_fiber

    splits = load_fiber(dataset_name, config_name)
    if split not in splits:
        raise DataError(
            f"--dataset_name {dataset_name or '(the bundled sample)'} has no split {split!r} "
            f"(splits: {', '.join(splits)})"
        )
    clips = splits[split]
    if max_predict_samples is not None:
        clips = clips.select(range(min(max_predict_samples, len(clips))))
    return clips


def clip_keys(split, described: str) -> "list[ClipKey]":
    """Each row's clip (video_id, video_start_time, video_end_time); a clip twice in the split is a DataError."""
    keys = list(zip(split["video_id"], split["video_start_time"], split["video_end_time"]))
    first_row = {}
    for index, key in enumerate(keys):
        if key in first_row:
            raise DataError(f"{described}: rows {first_row[key]} and {index} are the same clip {key}")
        first_row[key] = index
    return keys


def find_videos(
    video_dir: Path, keys: "list[ClipKey]", sampling: "FrameSampling", skip_missing: bool
) -> "tuple[list[ClipVideo | None], list[int | None]]":
    """Each clip's video, checked to give the frames of `sampling` (`check_video`), and how many frames it gives;
    None for a missing one with `skip_missing` (--skip_missing_videos).

    Every video is opened here, before any work, so that a bad one is one error line on every
    process at once, not a failure of one process in the middle of a run.
    """
    from tqdm.auto import tqdm

    from fiberbench.videos import check_video, expected_names, find_clip_video

    videos = [find_clip_video(video_dir, *key) for key in keys]
    missing = [key for key, video in zip(keys, videos) if video is None]
    if missing and not skip_missing:
        raise DataError(
            f"--video_dir {video_dir}: no video for clip {missing[0][0]} ({missing[0][1]}-{missing[0][2]} s): "
            f"looked for {expected_names(*missing[0])}; {len(missing)} of {len(keys)} clips have none. Pass "
            "--skip_missing_videos to predict the others (the skipped clips get an empty answer)"
        )
    unusable, frame_counts = [], []
    # Under `accelerate launch` every process checks every video; the first of each machine shows the bar.
    quiet = os.environ.get("LOCAL_RANK", "0") != "0"
    for key, video in zip(keys, tqdm(videos, desc="Checking the clips' videos", unit="video", disable=quiet)):
        try:
            frame_counts.append(None if video is None else sampling.count(check_video(video, sampling)))
        except DataError as error:
            unusable.append((key, error))
    if unusable:
        (video_id, start, end), error = unusable[0]
        raise DataError(
            f"{error} (the video of clip {video_id}, {start}-{end} s); {len(unusable)} of {len(keys)} clips' videos "
            "cannot be used"
        )
    if missing:
        logger.warning(
            "%d of %d clips have no video in %s: skipped, with an empty answer", len(missing), len(keys), video_dir
        )
    return videos, frame_counts


def dataset_fingerprint(split, reads_features: bool) -> str:
    """The fingerprint of what a model reads of each row (`split_fingerprint`): a rebuilt dataset with other captions
    or features is other data, for a resumed run and for --reread alike."""
    from fiberbench.data.loading import split_fingerprint
    from fiberbench.predictions import KEY_FIELDS

    return split_fingerprint(split, [*KEY_FIELDS, "masked_caption", *(["video_features"] if reads_features else [])])
