"""`fiberbench leaderboard`: build (and push) the FIBER leaderboard Space from a store of results.

The store is a Hub dataset repo (`--results_repo ORG/fiber-results`) or a local folder
(`--results_dir`), holding one folder per submission: the predictions file, its `fiberbench
evaluate` results and its metadata. `--add FILE --name NAME ...` first adds a predictions file
to the store, checked and scored as the Space's Submit tab does. The board is then computed once
(a stored file that no longer joins the split stops the command with one line) and printed, and
the Space folder is written into `--output_dir`: app.py, README.md, requirements.txt and
leaderboard.json (plus a copy of a local store). `--push_to_hub ORG/NAME` pushes it as a Gradio
Space; `python app.py` in the folder runs it locally.
"""

import argparse
import re
from pathlib import Path

from fiberbench.cli import positive_int, seed
from fiberbench.errors import UsageError

from fiberbench.leaderboard.space import RESULTS_DIR, SPACE_FILES
from fiberbench.leaderboard.submission import KINDS

OUTPUT_ENTRIES = re.compile("|".join(re.escape(name) for name in (*SPACE_FILES, RESULTS_DIR)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n", 2)[2]
    store = parser.add_mutually_exclusive_group(required=True)
    store.add_argument("--results_repo", help="The store: a Hub dataset repo, e.g. ORG/fiber-results.")
    store.add_argument("--results_dir", type=Path, help="The store: a local folder (created by the first --add).")
    parser.add_argument("--output_dir", type=Path, required=True, help="Where the Space folder is written.")
    parser.add_argument("--overwrite_output_dir", action="store_true", help="Replace an earlier Space folder there.")
    parser.add_argument("--push_to_hub", metavar="ORG/NAME", help="Push the Space folder to this Space.")
    parser.add_argument("--private", action="store_true", help="Create the pushed Space as private.")
    parser.add_argument("--hub_token", default=None, help="Hub token; default: HF_TOKEN or the saved login.")
    parser.add_argument("--title", default="FIBER leaderboard", help="The page's and the Space's title.")
    parser.add_argument(
        "--package_requirement",
        default=None,
        help="How the Space's requirements.txt names the FIBER package (default: fiber-benchmark[plots]==VERSION).",
    )
    data = parser.add_argument_group("the scores (as fiberbench evaluate takes them)")
    data.add_argument(
        "--dataset_name", default=None, help="A Hub dataset id, or a built folder (default: the bundled SYNTHETIC sample)."
    )
    data.add_argument("--dataset_config_name", default="text", help="The dataset config.")
    data.add_argument("--split", default="test", help="The split the board scores.")
    data.add_argument("--confidence_level", type=float, default=0.95, help="Of the bootstrap intervals.")
    data.add_argument("--num_bootstrap", type=positive_int, default=10_000, help="Resamples; also randomization trials.")
    data.add_argument("--seed", type=seed, default=0, help="Seed of the resamples and the randomization trials.")
    add = parser.add_argument_group("adding a system to the store first")
    add.add_argument("--add", type=Path, metavar="PREDICTIONS", help="A predictions file to add (as evaluate reads).")
    add.add_argument("--name", help="Its system name.")
    add.add_argument("--link", default="", help="A link to the paper, code or model (https://...).")
    add.add_argument("--kind", choices=KINDS, default="other", help="What kind of system it is.")
    add.add_argument("--video_input", default="", help="What it sees of the video (e.g. '8 frames as a video').")
    add.add_argument("--frames", type=positive_int, default=None, help="Frames per clip it reads.")
    add.add_argument("--answer_reading", default="", help="How the answer is read from its reply.")


def is_folder(dataset_name: str | None) -> bool:
    return dataset_name is not None and Path(dataset_name).is_dir()


def check_flags(args: argparse.Namespace):
    """Refuse flags that cannot work, before any work; the output folder to write."""
    from fiberbench.data import SAMPLE_DIR
    from fiberbench.hub import check_can_push
    from fiberbench.ownership import Output

    if not 0 < args.confidence_level < 1:
        raise UsageError(f"--confidence_level must be between 0 and 1 (e.g. 0.95), got {args.confidence_level}")
    if (args.add is None) != (args.name is None):
        raise UsageError("--add and --name go together: the file to add and its system name")
    if args.push_to_hub is not None:
        check_can_push(args.push_to_hub, args.hub_token)
        if is_folder(args.dataset_name):
            raise UsageError(
                f"--push_to_hub: the Space on the Hub cannot read the local folder {args.dataset_name}; push the "
                "dataset (build-dataset --push_to_hub) and give its Hub id as --dataset_name"
            )
    output = Output.output_dir(
        args.output_dir, overwrite=args.overwrite_output_dir, command="fiberbench leaderboard", entry_names=OUTPUT_ENTRIES
    )
    dataset = SAMPLE_DIR if args.dataset_name is None else Path(args.dataset_name)
    output.check([args.results_dir, args.add, dataset if dataset.is_dir() else None])
    return output


def run(args: argparse.Namespace) -> int:
    output = check_flags(args)
    with output.lock():
        return build(args, output)


def build(args: argparse.Namespace, output) -> int:
    from fiberbench.hub import push_folder

    from fiberbench.leaderboard.board import compute_board, load_benchmark
    from fiberbench.leaderboard.display import table_rows
    from fiberbench.leaderboard.space import write_space
    from fiberbench.leaderboard.store import open_store, read_entries
    from fiberbench.leaderboard.submission import Refused, check_metadata, submit

    settings = {"confidence_level": args.confidence_level, "num_bootstrap": args.num_bootstrap, "seed": args.seed}
    benchmark = load_benchmark(args.dataset_name, args.dataset_config_name, args.split, settings)
    store = open_store(args.results_repo, args.results_dir, args.hub_token)
    if args.add is not None:
        if not args.add.is_file():
            raise UsageError(f"--add {args.add}: no such file")
        try:
            metadata = check_metadata(args.name, args.link, args.kind, args.video_input, args.frames, args.answer_reading)
            store.create()
            submit(benchmark, store, args.add, metadata, str(args.add))
        except Refused as refusal:
            raise UsageError(f"--add: {refusal}") from None
        print(f"Added {args.name} to {store.describe()}")
    entries = read_entries(store.snapshot(args.split, store.head(args.split)), args.split)
    board = compute_board(benchmark, entries)
    for row in table_rows(board):
        print(" | ".join("" if cell is None else str(cell) for cell in row[:6]))
    config = {
        "title": args.title,
        "results_repo": args.results_repo,
        "results_dir": RESULTS_DIR if args.results_dir is not None else None,
        # The Space runs in its own folder: a local dataset folder is named by its absolute path.
        "dataset_name": str(Path(args.dataset_name).resolve()) if is_folder(args.dataset_name) else args.dataset_name,
        "dataset_config_name": args.dataset_config_name,
        "split": args.split,
        "settings": settings,
    }
    with output.atomic_folder() as staging:
        paths = write_space(staging, config, args.package_requirement, args.results_dir, args.split)
    systems = f"{len(entries)} system{'' if len(entries) == 1 else 's'}"
    print(f"Wrote the Space folder {args.output_dir} ({systems}); run it with `python app.py` there")
    if args.push_to_hub is not None:
        url = push_folder(
            args.output_dir,
            args.push_to_hub,
            repo_type="space",
            token=args.hub_token,
            private=args.private,
            commit_message="Upload the FIBER leaderboard with `fiberbench leaderboard`",
            paths=paths,
        )
        print(f"Pushed the leaderboard Space to {url}")
    return 0
