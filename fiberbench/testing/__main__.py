"""`python -m fiberbench.testing`: a tiny random model, or synthetic videos of a release-format folder's clips.

python -m fiberbench.testing model qwen2_5_vl tiny-qwen2.5-vl                                # a video-LLM family
python -m fiberbench.testing videos sample_videos --data_dir dataset_script/fiber/sample   # every split's clips
"""

import argparse
from pathlib import Path

from .tiny_models import SAVERS
from .tiny_videos import SPLIT_FILES, read_records, write_videos
from .video_families import VIDEO_FAMILIES, save_video_family

parser = argparse.ArgumentParser(prog="python -m fiberbench.testing", description=__doc__.splitlines()[0])
subparsers = parser.add_subparsers(dest="what", required=True)
model = subparsers.add_parser("model", help="Save a tiny random model of a kind or a video-LLM family.")
model.add_argument("family", choices=[*SAVERS, *VIDEO_FAMILIES])
model.add_argument("output_dir", type=Path)
videos = subparsers.add_parser("videos", help="Write a synthetic video for every clip of a release-format folder.")
videos.add_argument("output_dir", type=Path)
videos.add_argument("--data_dir", type=Path, required=True, help="The records' folder (train.json, val.json, test.json).")
videos.add_argument("--whole_videos", action="store_true", help="Every other clip as its whole video, to be cut.")
videos.add_argument("--split", nargs="+", choices=list(SPLIT_FILES), default=list(SPLIT_FILES), help="Only these splits.")
args = parser.parse_args()
if args.what == "model":
    (SAVERS.get(args.family) or (lambda folder: save_video_family(args.family, folder)))(args.output_dir)
    print(f"Saved a tiny random {args.family} model in {args.output_dir}")
else:
    clips = sum(write_videos(args.output_dir, read_records(args.data_dir, split), args.whole_videos) for split in args.split)
    print(f"Wrote synthetic videos of the {clips} clips of {args.data_dir} ({', '.join(args.split)}) to {args.output_dir}")
