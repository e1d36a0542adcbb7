"""`python -m fiberbench.testing model NAME DIR` (a tiny random model or encoder, offline, in seconds) or
`python -m fiberbench.testing videos DIR --data_dir RELEASE_FOLDER` (synthetic videos of its clips)."""

import argparse
from functools import partial
from pathlib import Path

from .tiny_videos import SPLIT_FILES, read_records, write_videos

parser = argparse.ArgumentParser(prog="python -m fiberbench.testing", description=__doc__)
commands = parser.add_subparsers(dest="what", required=True)
model = commands.add_parser("model", help="Save a tiny random model: a kind, a video-LLM family or an encoder.")
model.add_argument("name", help="A kind (seq2seq, causal, ...), a video-LLM family or an encoder.")
model.add_argument("output_dir", type=Path)
videos = commands.add_parser("videos", help="Write a synthetic video for every clip of a release-format folder.")
videos.add_argument("output_dir", type=Path)
videos.add_argument("--data_dir", type=Path, required=True, help="The records (train.json, val.json, test.json).")
videos.add_argument("--whole_videos", action="store_true", help="Every other clip as its whole video, to be cut.")
videos.add_argument("--split", nargs="+", choices=list(SPLIT_FILES), default=list(SPLIT_FILES), help="These splits.")
args = parser.parse_args()
if args.what == "model":
    # Here only: building models needs torch and transformers, which videos do not (seconds of imports).
    from . import tiny_encoders, tiny_models
    from .video_families import VIDEO_FAMILIES, save_video_family
    families = {name: partial(save_video_family, name) for name in VIDEO_FAMILIES}
    models = {**tiny_models.SAVERS, **families, **tiny_encoders.SAVERS}
    if args.name not in models:
        model.error(f"argument name: invalid choice: {args.name!r} (choose from {', '.join(models)})")
    models[args.name](args.output_dir)
    print(f"Saved a tiny random {args.name} in {args.output_dir}")
else:
    records = [record for split in args.split for record in read_records(args.data_dir, split)]
    write_videos(args.output_dir, records, args.whole_videos)
    print(f"Wrote synthetic videos of {len(records)} clips ({' '.join(args.split)}) to {args.output_dir}")
