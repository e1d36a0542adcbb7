"""`fiberbench leaderboard`: build (and push) the FIBER leaderboard Space from a store of results.

The store is a Hub dataset repo (`--results_repo ORG/fiber-results`) or a local folder
(`--results_dir`), holding one folder per submission: the predictions file, its `fiberbench
evaluate` results and its metadata. `--add FILE --name NAME ...` first adds a predictions file
to the store, checked and scored as the Space's Submit tab does. The board is then computed once
(a stored file that no longer joins the split stops the command with one line) and printed, and
the Space folder is written into `--output_dir`: this folder's app.py, src/ and README.md (the Space's
card), requirements.txt and leaderboard.json (plus a copy of a local store). `--push_to_hub
ORG/NAME` pushes it as a Gradio Space; `python app.py` in the folder runs it locally.

The Space installs this package (requirements.txt) rather than a copy of its scoring code, so that the board
scores with the very code of `fiberbench evaluate`; the requirement pins the version that built the folder.
"""

import argparse
import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from huggingface_hub import RepoCard

from fiberbench import __version__
from fiberbench.cli import positive_int, seed
from fiberbench.data import SAMPLE_DIR
from fiberbench.errors import UsageError
from fiberbench.hub import check_can_push, push_folder
from fiberbench.metric.evaluate.predictions import load_split
from fiberbench.outputs import check_output, finish_output, output_lock, start_output, write_json, write_text

from .src.display import table_rows
from .src.populate import SUBMISSIONS, compute_board, open_store, read_entries, submission_folders
from .src.submission import KINDS, Refused, check_metadata, submit

COMMAND, HERE = "fiberbench leaderboard", Path(__file__).resolve().parent


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
    parser.add_argument("--hub_token", help="Hub token; default: HF_TOKEN or the saved login.")
    parser.add_argument("--title", default="FIBER leaderboard", help="The page's and the Space's title.")
    parser.add_argument("--package_requirement", help="How the Space's requirements.txt names the FIBER package "
                        "(default: fiber-benchmark[plots]==VERSION).")
    data = parser.add_argument_group("the scores (as fiberbench evaluate takes them)")
    data.add_argument("--dataset_name", help="A Hub dataset id or a built folder (default: the SYNTHETIC sample).")
    data.add_argument("--dataset_config_name", default="text", help="The dataset config.")
    data.add_argument("--split", default="test", help="The split the board scores.")
    data.add_argument("--confidence_level", type=float, default=0.95, help="Of the bootstrap intervals.")
    data.add_argument("--num_bootstrap", type=positive_int, default=10_000, help="Resamples, randomization trials.")
    data.add_argument("--seed", type=seed, default=0, help="Seed of the resamples and the randomization trials.")
    add = parser.add_argument_group("adding a system to the store first")
    add.add_argument("--add", type=Path, metavar="PREDICTIONS", help="A predictions file to add (as evaluate reads).")
    add.add_argument("--name", help="Its system name.")
    add.add_argument("--link", default="", help="A link to the paper, code or model (https://...).")
    add.add_argument("--kind", choices=KINDS, default="other", help="What kind of system it is.")
    add.add_argument("--video_input", default="", help="What it sees of the video (e.g. '8 frames as a video').")
    add.add_argument("--frames", type=positive_int, help="Frames per clip it reads.")
    add.add_argument("--answer_reading", default="", help="How the answer is read from its reply.")


def run(args: argparse.Namespace) -> int:
    local_dataset = args.dataset_name is not None and Path(args.dataset_name).is_dir()
    if not 0 < args.confidence_level < 1:
        raise UsageError(f"--confidence_level must be between 0 and 1 (e.g. 0.95), got {args.confidence_level}")
    if (args.add is None) != (args.name is None):
        raise UsageError("--add and --name go together: the file to add and its system name")
    if args.push_to_hub is not None:
        check_can_push(args.push_to_hub, args.hub_token)
        if local_dataset:
            raise UsageError(f"--push_to_hub: the Space on the Hub cannot read the local folder {args.dataset_name}; "
                             "push the dataset (build-dataset --push_to_hub) and give its Hub id as --dataset_name")
    try:
        sdk_version = version("gradio")
    except PackageNotFoundError:
        raise UsageError("the leaderboard is a Gradio page: install gradio (`pip install gradio`)") from None
    with output_lock(args.output_dir, "--output_dir"):
        dataset = SAMPLE_DIR if args.dataset_name is None else args.dataset_name if local_dataset else None
        previous = check_output(args.output_dir, command=COMMAND, flag="--output_dir", folder=True,
                                overwrite=args.overwrite_output_dir, inputs=[args.results_dir, args.add, dataset])
        settings = {"confidence_level": args.confidence_level, "num_bootstrap": args.num_bootstrap, "seed": args.seed}
        split = load_split(args.dataset_name, args.dataset_config_name, args.split)
        store = open_store(args.results_repo, args.results_dir, args.hub_token)
        if args.add is not None:
            if not args.add.is_file():
                raise UsageError(f"--add {args.add}: no such file")
            try:
                metadata = check_metadata(args.name, args.link, args.kind, args.video_input, args.frames,
                                          args.answer_reading)
                store.create()
                submit(split, settings, store, args.add, metadata, str(args.add))
            except Refused as refusal:
                raise UsageError(f"--add: {refusal}") from None
            print(f"Added {args.name} to {store.describe()}")
        entries = read_entries(store.snapshot(args.split, store.head(args.split)), args.split)
        for row in table_rows(compute_board(split, settings, entries)):
            print(" | ".join("" if cell is None else str(cell) for cell in row[:6]))
        config = {
            "title": args.title,
            "results_repo": args.results_repo,
            "results_dir": "results" if args.results_dir is not None else None,
            # The Space runs in its own folder: a local dataset folder is named by its absolute path.
            "dataset_name": str(Path(args.dataset_name).resolve()) if local_dataset else args.dataset_name,
            "dataset_config_name": args.dataset_config_name,
            "split": args.split,
            "settings": settings,
        }
        record = start_output(args.output_dir, COMMAND, previous, folder=True)
        write_space(args.output_dir, config, args.package_requirement, args.results_dir, sdk_version)
        finish_output(args.output_dir, record)
    print(f"Wrote the Space folder {args.output_dir} ({len(entries)} system{'s' * (len(entries) != 1)}); run it with "
          "`python app.py` there")
    if args.push_to_hub is not None:
        url = push_folder(args.output_dir, args.push_to_hub, repo_type="space", token=args.hub_token,
                          private=args.private, paths=record["files"],
                          commit_message="Upload the FIBER leaderboard with `fiberbench leaderboard`")
        print(f"Pushed the leaderboard Space to {url}")
    return 0


def write_space(folder: Path, config: dict, requirement: str | None, results_dir: Path | None, sdk_version: str):
    """The Space folder: the page (app.py and src/), its card, requirements.txt, leaderboard.json, a local store."""
    for source in [HERE / "app.py", *sorted((HERE / "src").glob("*.py"))]:
        write_text(folder / source.relative_to(HERE), source.read_text(encoding="utf-8"))
    card = RepoCard.load(HERE / "README.md")  # the Space's card, with this build's title and Gradio
    card.data.title, card.data.sdk_version = config["title"], sdk_version
    write_text(folder / "README.md", str(card).replace("# FIBER leaderboard", f"# {config['title']}", 1))
    write_text(folder / "requirements.txt", f"{requirement or f'fiber-benchmark[plots]=={__version__}'}\n")
    write_json(folder / "leaderboard.json", config)
    if results_dir is not None:
        for submission in submission_folders(results_dir, config["split"]):
            shutil.copytree(submission, folder / "results" / SUBMISSIONS / config["split"] / submission.name)
