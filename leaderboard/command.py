"""`fiberbench leaderboard`: build (and push) the FIBER leaderboard Space from a store of results.

The store is a Hub dataset repo (`--results_repo`) or a local folder (`--results_dir`). `--add FILE --name NAME ...`
first adds a predictions file, checked and scored as the Submit tab does; the flags after an --add, up to the next,
describe that system (all or none are added). The board is printed and the Space folder written into `--output_dir`
(replacing this command's earlier one): app.py, src/, its card, requirements.txt (this package, so that the Space
scores with `fiberbench evaluate`'s code) and leaderboard.json. `--push_to_hub ORG/NAME` pushes it as a Gradio Space.
"""

import argparse
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from huggingface_hub import RepoCard

from fiberbench import __version__
from fiberbench.cli import positive_int, seed
from fiberbench.data import SAMPLE_DIR
from fiberbench.errors import DataError, UsageError
from fiberbench.hub import check_can_push, push_folder
from fiberbench.metric.evaluate.predictions import load_split
from fiberbench.outputs import check_output, finish_output, output_lock, start_output, write_json, write_text

from .src.display import table_rows
from .src.metadata import FIELDS, Refused, name_key
from .src.populate import SUBMISSIONS, Board, HubStore, LocalStore
from .src.submission import commit, prepare

COMMAND, HERE = "fiberbench leaderboard", Path(__file__).resolve().parent


class _SystemFlag(argparse.Action):
    """--add starts a system; each flag after it, up to the next --add, is that system's own."""

    def __call__(self, parser, namespace, value, option=None):
        systems = namespace.systems = namespace.systems or []
        if self.dest == "add":
            systems.append({"add": value})
        elif not systems:
            parser.error(f"{option} describes a system: give it after that system's --add")
        elif self.dest in systems[-1]:
            parser.error(f"{option} given twice for --add {systems[-1]['add']}")
        else:
            systems[-1][self.dest] = True if self.nargs == 0 else value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n", 2)[2]
    store = parser.add_mutually_exclusive_group(required=True)
    store.add_argument("--results_repo", help="The store: a Hub dataset repo, e.g. ORG/fiber-results.")
    store.add_argument("--results_dir", type=Path, help="The store: a local folder (created by the first --add).")
    parser.add_argument("--output_dir", type=Path, required=True, help="Where the Space folder is written.")
    parser.add_argument("--push_to_hub", metavar="ORG/NAME", help="Push the Space folder to this Space.")
    parser.add_argument("--private", action="store_true", help="Create the pushed Space as private.")
    parser.add_argument("--hub_token", help="Hub token; default: HF_TOKEN or the saved login.")
    parser.add_argument("--title", default="FIBER leaderboard", help="The page's and the Space's title.")
    parser.add_argument("--package_requirement", help="How the Space's requirements.txt names the FIBER package "
                        "(default: fiber-benchmark[plots]==VERSION).")
    parser.add_argument("--submissions_per_day", type=positive_int, default=5,
                        help="How many files the Space's Submit tab takes from one submitter a day (UTC).")
    data = parser.add_argument_group("the scores (as fiberbench evaluate takes them)")
    data.add_argument("--dataset_name", help="A Hub dataset id or a built folder (default: the SYNTHETIC sample).")
    data.add_argument("--dataset_config_name", default="text", help="The dataset config.")
    data.add_argument("--split", default="test", help="The split the board scores.")
    data.add_argument("--confidence_level", type=float, default=0.95, help="Of the bootstrap intervals.")
    data.add_argument("--num_bootstrap", type=positive_int, default=10_000, help="Bootstrap resamples.")
    data.add_argument("--seed", type=seed, default=0, help="Seed of the bootstrap resamples.")
    add = parser.add_argument_group("adding systems to the store first (each flag after the --add it describes)")
    parser.set_defaults(systems=None)
    add.add_argument("--add", action=_SystemFlag, type=Path, metavar="PREDICTIONS", help="A predictions file to add.")
    add.add_argument("--control", action=_SystemFlag, type=Path, metavar="PREDICTIONS", help="Its blind control: the "
                     "same system without the video (`fiberbench predict --video_input none`), for its video gain.")
    for field, (_, hint, choices) in FIELDS.items():
        add.add_argument("--name" if field == "system" else f"--{field}", action=_SystemFlag, dest=field,
                         choices=choices, help=hint)
    add.add_argument("--verified", action=_SystemFlag, nargs=0, help="The maintainers ran it: the row is verified.")


def run(args: argparse.Namespace) -> int:
    local_dataset = args.dataset_name is not None and Path(args.dataset_name).is_dir()
    systems = args.systems or []
    if not 0 < args.confidence_level < 1:
        raise UsageError(f"--confidence_level must be between 0 and 1 (e.g. 0.95), got {args.confidence_level}")
    for system in systems:
        if "system" not in system:
            raise UsageError(f"--add {system['add']}: give its --name after it")
        for flag in ("add", "control"):
            if flag in system and not system[flag].is_file():
                raise UsageError(f"--{flag} {system[flag]}: no such file")
    if args.results_dir is not None and not systems and not (args.results_dir / SUBMISSIONS).is_dir():
        raise UsageError(f"--results_dir {args.results_dir}: not a store (no {SUBMISSIONS}/ folder in it); the first "
                         "--add makes one")
    if args.push_to_hub is not None:
        if local := args.results_dir or (args.dataset_name if local_dataset else None):
            raise UsageError(f"--push_to_hub: the Space on the Hub cannot read the local folder {local}; push it to "
                             "the Hub (--results_repo; build-dataset --push_to_hub) and name it by its Hub id")
        check_can_push(args.push_to_hub, args.hub_token)
    try:
        sdk_version = version("gradio")
    except PackageNotFoundError:
        raise UsageError("the leaderboard is a Gradio page: install gradio (`pip install gradio`)") from None
    with output_lock(args.output_dir, "--output_dir"):
        dataset = SAMPLE_DIR if args.dataset_name is None else args.dataset_name if local_dataset else None
        # The Space folder is made from the store alone: this command's earlier one is replaced without asking.
        inputs = [args.results_dir, dataset, *(system.get(flag) for system in systems for flag in ("add", "control"))]
        previous = check_output(args.output_dir, command=COMMAND, flag="--output_dir", folder=True, overwrite=True,
                                inputs=inputs)
        settings = {"confidence_level": args.confidence_level, "num_bootstrap": args.num_bootstrap, "seed": args.seed}
        split = load_split(args.dataset_name, args.dataset_config_name, args.split)
        store = HubStore(args.results_repo, args.hub_token) if args.results_repo else LocalStore(args.results_dir)
        add_systems(store, split, settings, systems)
        board = Board(split, settings).update(*store.read(args.split, store.head(args.split)))
        if board["problems"]:
            raise DataError(f"{len(board['problems'])} stored submission(s) cannot be shown: {board['problems'][0]}")
        for row in table_rows(board):
            print(" | ".join("" if cell is None else str(cell) for cell in row[:6]))
        # The Space runs in its own folder: a local store or dataset folder is named by its absolute path.
        config = {"title": args.title, "results_repo": args.results_repo,
                  "results_dir": args.results_dir and str(args.results_dir.resolve()),
                  "dataset_name": str(Path(args.dataset_name).resolve()) if local_dataset else args.dataset_name,
                  "dataset_config_name": args.dataset_config_name, "split": args.split, "settings": settings,
                  "submissions_per_day": args.submissions_per_day}
        record = start_output(args.output_dir, COMMAND, previous, folder=True)
        write_space(args.output_dir, config, args.package_requirement, sdk_version)
        finish_output(args.output_dir, record)
    count = len(board["metadata"])
    print(f"Wrote the Space folder {args.output_dir} ({count} system{'s' * (count != 1)}); run it with `python app.py` "
          "there")
    if args.push_to_hub is not None:
        url = push_folder(args.output_dir, args.push_to_hub, repo_type="space", token=args.hub_token,
                          private=args.private, paths=record["files"],
                          commit_message="Upload the FIBER leaderboard with `fiberbench leaderboard`")
        print(f"Pushed the leaderboard Space to {url}")
    return 0


def add_systems(store, split, settings: dict, systems: list[dict]) -> None:
    """Check and score every --add before storing any (all or none), each name unlike the store's and the others'."""
    if not systems:
        return
    store.create()
    head, prepared = store.head(split.name), []
    for system in systems:
        fields = {field: value for field, value in system.items() if field not in ("add", "control")}
        control = (system["control"], str(system["control"])) if "control" in system else None
        taken = {name_key(metadata["system"]) for metadata, _ in prepared}
        try:
            prepared.append(prepare(split, settings, store, system["add"], fields, str(system["add"]), head, taken,
                                    control))
        except Refused as refusal:
            raise UsageError(f"--add {system['add']}: {refusal}") from None
    for metadata, files in prepared:
        head = commit(store, split, metadata, files, head)
        print(f"Added {metadata['system']} to {store.describe()}")


def write_space(folder: Path, config: dict, requirement: str | None, sdk_version: str):
    """The Space folder: the page (app.py and src/), its card, requirements.txt, leaderboard.json."""
    for source in [HERE / "app.py", *sorted((HERE / "src").glob("*.py"))]:
        write_text(folder / source.relative_to(HERE), source.read_text(encoding="utf-8"))
    card = RepoCard.load(HERE / "README.md")  # the Space's card, with this build's title and Gradio
    card.data.title, card.data.sdk_version = config["title"], sdk_version
    write_text(folder / "README.md", str(card).replace("# FIBER leaderboard", f"# {config['title']}", 1))
    write_text(folder / "requirements.txt", f"{requirement or f'fiber-benchmark[plots]=={__version__}'}\n")
    write_json(folder / "leaderboard.json", config)
