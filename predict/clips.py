"""The clips of a FIBER split (`load_split`, `clip_keys`), and `fiberbench clips`: which of them have a video in a
folder, as a manifest whose fingerprint (`fiberbench.records.clips_fingerprint` of the clips present) a predictions
file's record can be compared with: two labs holding different videos score different clips."""

import argparse
import logging
from pathlib import Path

from fiberbench.cli import add_output_arguments
from fiberbench.data import load_fiber
from fiberbench.data.loading import dataset_location
from fiberbench.errors import DataError
from fiberbench.outputs import check_output, finish_output, output_lock, start_output, write_json
from fiberbench.records import KEY_FIELDS, clip_id, clips_fingerprint
from fiberbench.videos import find_clip_video

logger = logging.getLogger(__name__)

COMMAND = "fiberbench clips"


def load_split(dataset_name: str | None, split: str, max_predict_samples: int | None, config_name: str):
    """The clips to predict: the first `max_predict_samples` (all with None) of `split` of the dataset (or sample)."""
    splits = load_fiber(dataset_name, config_name)
    if split not in splits:
        raise DataError(f"--dataset_name {dataset_name or '(the bundled sample)'} has no split {split!r} (splits: "
                        f"{', '.join(splits)})")
    clips = splits[split]
    return clips.select(range(min(max_predict_samples, len(clips)))) if max_predict_samples else clips


def clip_keys(split, described: str = "the split") -> list[tuple]:
    """Each row's clip (video_id, video_start_time, video_end_time); a clip twice in the split is a `DataError`."""
    keys, first_row = list(zip(*(split[field] for field in KEY_FIELDS))), {}
    for index, key in enumerate(keys):
        if key in first_row:
            raise DataError(f"{described}: rows {first_row[key]} and {index} are the same clip {key}")
        first_row[key] = index
    if not keys:
        raise DataError(f"{described}: has no clips")
    return keys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("A clip is present when its video is found as fiberbench predict looks for it (its own file or "
                     "its whole video); predict checks each before any work. The manifest's clips_fingerprint is the "
                     "one a predictions file's record gives for the clips it answered (output.clips_fingerprint).")
    parser.add_argument("video_dir", type=Path, help="The clips' videos: VIDEO_ID_START_END.mp4 (clip ids) or whole "
                        "VIDEO_ID.mp4 (or .mkv, .webm).")
    parser.add_argument("--dataset_name", help="A FIBER dataset folder or Hub id (default: the SYNTHETIC sample).")
    parser.add_argument("--split", default="test", help="The split (default: test).")
    add_output_arguments(parser, "The manifest (JSON): the dataset, the split, the clip ids present and missing, "
                         "the fingerprint of those present.", "Replace an earlier manifest.", required=False,
                         default=Path("clips.json"))


def run(args: argparse.Namespace) -> int:
    """`fiberbench clips` with the parsed command line `args`."""
    if not args.video_dir.is_dir():
        raise DataError(f"{args.video_dir}: no such folder (give the folder of the clips' videos)")
    keys = clip_keys(load_split(args.dataset_name, args.split, None, "text"))
    found = {clip_id(*key): find_clip_video(args.video_dir, *key) is not None for key in keys}
    present = [clip for clip, there in found.items() if there]
    missing = [clip for clip, there in found.items() if not there]
    manifest = {"dataset": dataset_location(args.dataset_name), "split": args.split, "clips": len(keys),
                "present": present, "missing": missing, "clips_fingerprint": clips_fingerprint(present)}
    with output_lock(args.output_file, "--output_file"):
        previous = check_output(args.output_file, command=COMMAND, flag="--output_file",
                                overwrite=args.overwrite_output_file, inputs=[args.video_dir, args.dataset_name])
        record = start_output(args.output_file, COMMAND, previous, folder=False)
        write_json(args.output_file, manifest)
        finish_output(args.output_file, record)
    logger.info("%d of %d clips of %s, split %s, have a video in %s (%d missing): %s, fingerprint %s", len(present),
                len(keys), args.dataset_name or "the bundled sample", args.split, args.video_dir, len(missing),
                args.output_file, manifest["clips_fingerprint"])
    return 0
