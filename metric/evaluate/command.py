"""`fiberbench evaluate`: score any system's predictions on a FIBER split, with confidence intervals and comparisons.

Each predictions file holds one row per blank of the split (JSON Lines, a JSON array or CSV), keyed
by `video_id`, `video_start_time` and `video_end_time`, with the answer in `prediction` and,
optionally, the ranked `candidates` (in CSV, a JSON-encoded list). training/train.py's
predictions.jsonl is one: its rows of other splits are skipped; so is the samples file that lmms-eval
logs for the FIBER task (--log_samples: `*_samples_fiber_test.jsonl`). The join with the split is
strict: a missing, repeated or unknown blank is an error naming the file and the line, and each file
is one system (a file given twice is refused). Every score comes from the metric's own functions, so
it equals `evaluate.load("metric/fiber_metric").compute` on the same inputs, and so do the bootstrap
confidence intervals and the p-values (each depends only on its own per-blank scores and the seed).
Where a file records how its answers were read from a model's replies (`fiberbench predict`'s
metadata beside it, or the `reader` of each lmms-eval sample), the reading is shown with the
system's scores, and a line says so when the systems compared were read differently.
"""

import argparse
import contextlib
import logging
from pathlib import Path

from fiberbench.cli import positive_int, seed
from fiberbench.collector import collector_held_off
from fiberbench.errors import UsageError
from fiberbench.files import file_identity, write_json, write_text
from fiberbench.ownership import Output, names_pattern
from fiberbench.predictions import FORMATS, read_rows
from fiberbench.metric.scoring.figure import CategoryPlot
from fiberbench.metric.scoring.report import READ_DIFFERENTLY, leaderboard_markdown
from fiberbench.metric.scoring.results import evaluate_systems
from fiberbench.metric.scoring.split import load_split, read_splits, read_system

from fiberbench.metric.evaluate import model_index

logger = logging.getLogger(__name__)

RESULTS_FILE, LEADERBOARD_FILE, PLOT_FILE = "results.json", "results.md", "by_category.png"
OUTPUT_ENTRIES = names_pattern(RESULTS_FILE, LEADERBOARD_FILE, PLOT_FILE)


def _not_utf8(text: str) -> str | None:
    """`text` shown with its bytes that are not UTF-8 as \\x.. escapes, when it has such bytes; else None.

    On the command line, such bytes reach Python as lone surrogates (`os.fsdecode`'s surrogateescape).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


def system_names(paths: list[Path], names: list[str] | None) -> list[str]:
    """`--names`, or the files' stems made unique (by their folder's name, then by a number); each file once.

    Every name and file name must be UTF-8 text, as results.json and results.md are.
    """
    for path in paths:
        if (shown := _not_utf8(str(path))) is not None:
            raise UsageError(f"{shown}: the file name is not UTF-8 text, which results.json must be; rename the file")
    if names is not None:
        if len(names) != len(paths):
            raise UsageError(f"--names gives {len(names)} names for {len(paths)} predictions files")
        if len(set(names)) != len(names):
            raise UsageError(f"--names must all be different, got {names}")
        for name in names:
            if (shown := _not_utf8(name)) is not None:
                raise UsageError(f"--names: '{shown}' is not UTF-8 text, which results.json and results.md must be")
    else:
        stems = [path.stem for path in paths]
        names = [f"{path.parent.name}/{path.stem}" if stems.count(path.stem) > 1 else path.stem for path in paths]
        names = [f"{name} ({names[:i].count(name) + 1})" if names.count(name) > 1 else name for i, name in enumerate(names)]
    first: dict[tuple[int, int] | Path, int] = {}
    for index, path in enumerate(paths):
        earlier = first.setdefault(file_identity(path), index)  # a hard link of a file is that file again
        if earlier != index:
            # The same file under another spelling (a link, another folder's path) is named both ways.
            places = (
                f"the {ordinal(earlier + 1)} and {ordinal(index + 1)} file"
                if path == paths[earlier]
                else f"the {ordinal(earlier + 1)} file, and as {path} the {ordinal(index + 1)}"
            )
            raise UsageError(f"{paths[earlier]} is given twice (as {places}): give each predictions file once")
    return names


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n", 2)[2]
    parser.add_argument("predictions", nargs="+", type=Path, help="Predictions files (.jsonl, .json or .csv).")
    parser.add_argument("--names", nargs="+", help="The systems' names (default: the files' stems, made unique).")
    parser.add_argument(
        "--dataset_name",
        default=None,
        help="A folder built by build-dataset, or a Hub dataset id (default: the bundled SYNTHETIC sample).",
    )
    parser.add_argument("--dataset_config_name", default="text", help="The dataset config (text is all scoring needs).")
    parser.add_argument("--split", default="test", help="The split the predictions are for.")
    parser.add_argument("--output_dir", type=Path, help=f"Where {RESULTS_FILE}, {LEADERBOARD_FILE} and {PLOT_FILE} go.")
    parser.add_argument("--overwrite_output_dir", action="store_true", help="Replace a non-empty --output_dir.")
    parser.add_argument("--confidence_level", type=float, default=0.95, help="Of the bootstrap confidence intervals.")
    parser.add_argument(
        "--num_bootstrap", type=positive_int, default=10_000, help="Resamples; also the randomization trials."
    )
    parser.add_argument(
        "--seed", type=seed, default=0, help="Seed of the resamples and of the randomization trials."
    )
    parser.add_argument(
        "--model_index",
        type=Path,
        metavar="README.md",
        help="Write the system's scores into this model card's `model-index` metadata, which the Hub shows on the "
        "model's page (one predictions file; an existing card keeps its text and other metadata).",
    )
    parser.add_argument(
        "--with_baselines",
        action="store_true",
        help="Add reference rows: the most frequent training answer, and human agreement (leave one annotator out).",
    )


def check_flags(args: argparse.Namespace) -> tuple[list[str], Output | None, list]:
    """Refuse, before any work, flag values that cannot work.

    Returns the systems' names, the output folder to write (None without --output_dir; `Output.open` checks it) and
    the inputs it must keep apart from.
    """
    names = system_names(args.predictions, args.names)
    model_index.check_flag(args.model_index, names)
    if not 0 < args.confidence_level < 1:
        raise UsageError(f"--confidence_level must be between 0 and 1 (e.g. 0.95), got {args.confidence_level}")
    if args.output_dir is None:
        if args.overwrite_output_dir:
            raise UsageError("--overwrite_output_dir needs --output_dir")
        return names, None, []
    from fiberbench.data import SAMPLE_DIR

    dataset = SAMPLE_DIR if args.dataset_name is None else Path(args.dataset_name)
    output = Output.output_dir(
        args.output_dir, overwrite=args.overwrite_output_dir, command="fiberbench evaluate", entry_names=OUTPUT_ENTRIES
    )
    return names, output, [*args.predictions, dataset if dataset.is_dir() else None]


def run(args: argparse.Namespace) -> int:
    names, output, inputs = check_flags(args)
    with contextlib.ExitStack() as stack:
        plot = None
        if output is not None:
            stack.enter_context(output.open(inputs))
            plot = stack.enter_context(CategoryPlot())  # its process imports matplotlib while this one scores
        stack.enter_context(collector_held_off())  # rows, answers and scores: millions of small objects
        results, with_categories = score_files(args, names)
        return write_results(args, names, output, results, plot if with_categories else None)


def score_files(args: argparse.Namespace, names: list[str]) -> tuple[dict, bool]:
    """Every predictions file scored as the system `names` says: results.json's content, and whether the split has
    categories (for the plot).

    The split and the systems live and die in this call, which writes nothing: at 100,000 blanks they
    hold 700 MB, let go before the results are written.
    """
    from fiberbench.data.provenance import is_synthetic

    for path in args.predictions:  # a missing file or an unknown format before the dataset is loaded
        if path.suffix.lower() not in FORMATS or not path.is_file():
            read_rows(path)
    described = "the bundled sample" if args.dataset_name is None else args.dataset_name
    splits = read_splits(args.dataset_name, args.dataset_config_name)
    if args.with_baselines and args.split in splits and "train" not in splits:
        raise UsageError(f"--with_baselines needs a train split (for the most frequent answer); {described} has none")
    split = load_split(splits, args.split, described, with_human_agreement=args.with_baselines)
    train_labels = splits["train"].column("label").to_pylist() if args.with_baselines else None
    del splits
    synthetic = is_synthetic(args.dataset_name)
    if synthetic:
        logger.warning("Scoring on SYNTHETIC data (%s): the numbers say nothing about FIBER", described)
    keys = split.index()
    # One file at a time: only one file's rows are held at once (100,000 rows are about 100 MB).
    systems = [read_system(path, name, split, keys) for path, name in zip(args.predictions, names)]

    settings = {"confidence_level": args.confidence_level, "num_bootstrap": args.num_bootstrap, "seed": args.seed}
    results = {
        "dataset": {
            "name": args.dataset_name or "the bundled sample",
            "config": args.dataset_config_name,
            "split": args.split,
            "num_blanks": len(split),
            "synthetic": synthetic,
        },
        "settings": {**settings, "num_permutations": args.num_bootstrap},
        **evaluate_systems(systems, split, settings, train_labels),
    }
    return results, split.categories is not None


def write_results(
    args: argparse.Namespace, names: list[str], output: Output | None, results: dict, plot: CategoryPlot | None
) -> int:
    """Print the leaderboard of `results`; write them into the model card (--model_index) and `output` (if any), with
    the `plot` by category where the split has categories."""
    leaderboard = leaderboard_markdown(results)
    print(leaderboard, flush=True)
    if results["readings_differ"]:
        logger.warning(READ_DIFFERENTLY)
    if args.model_index is not None:
        model_index.write(args.model_index, results)
        logger.info("Wrote the model-index of %s into %s", names[0], args.model_index)
    if output is None:
        logger.info("No --output_dir: nothing written")
        return 0
    with output.atomic_folder() as staging:
        write_json(staging / RESULTS_FILE, results)
        write_text(staging / LEADERBOARD_FILE, leaderboard)
        plotted = plot is not None and plot.write(results, staging / PLOT_FILE)
    written = [RESULTS_FILE, LEADERBOARD_FILE] + ([PLOT_FILE] if plotted else [])
    logger.info("Wrote %s to %s", ", ".join(written), args.output_dir)
    return 0
