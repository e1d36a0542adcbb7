"""`python -m fiberbench.testing`: a tiny random video-LLM, or synthetic videos of the sample's clips, offline.

python -m fiberbench.testing model qwen2_5_vl tiny-qwen2.5-vl   # a tiny model of a family
python -m fiberbench.testing videos sample_videos               # every split's clips' videos
"""

import argparse
from pathlib import Path

from fiberbench.data.fiber.release import SPLIT_FILES

from .tiny_videos import write_sample_videos
from .video_families import VIDEO_FAMILIES, save_video_family


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fiberbench.testing", description="Tiny random video-LLMs and synthetic videos, offline, in seconds."
    )
    subparsers = parser.add_subparsers(dest="what", required=True)
    model = subparsers.add_parser("model", help="Save a tiny random model of a video-LLM family.")
    model.add_argument("family", choices=list(VIDEO_FAMILIES))
    model.add_argument("output_dir", type=Path)
    videos = subparsers.add_parser("videos", help="Write a synthetic video for every clip of the bundled sample.")
    videos.add_argument("output_dir", type=Path)
    videos.add_argument("--clip_files_only", action="store_true", help="No whole videos: a file of each clip alone.")
    videos.add_argument(
        "--split", nargs="+", choices=list(SPLIT_FILES), default=list(SPLIT_FILES), help="Only these splits."
    )
    args = parser.parse_args(argv)
    if args.what == "model":
        save_video_family(args.family, args.output_dir)
        print(f"Saved a tiny random {args.family} model in {args.output_dir}")
    else:
        clips = write_sample_videos(args.output_dir, whole_videos=not args.clip_files_only, splits=args.split)
        splits = ", ".join(args.split)
        print(f"Wrote synthetic videos for the bundled sample's {clips} clips ({splits}) to {args.output_dir}")


if __name__ == "__main__":
    main()
