"""`fiberbench evaluate`: score any system's predictions on a FIBER split, with confidence intervals and comparisons.

Each predictions file (JSON Lines, a JSON array or CSV; train.py's predictions.jsonl, lmms-eval's samples of the
FIBER task) holds one row per blank of the split, keyed by `video_id`, `video_start_time` and `video_end_time`, with
the answer in `prediction` (and, optionally, ranked `candidates`), or `"missing": true` where the clip's video was
missing. The join is strict: a blank without a row, given twice or not in the split is an error naming the file and
the line. Each file is one system, scored on the blanks it answered (and as the paper would, missing = wrong);
--control NAME=FILE gives its blind control (`fiberbench predict --video_input none`), for its gain from the video.
Every score, interval and p-value is the metric's own (`evaluate.load("metric/fiber_metric").compute` gives the same).
"""

import argparse
import contextlib
import logging
import unicodedata
from pathlib import Path

from fiberbench.cli import positive_int, seed
from fiberbench.data import SAMPLE_DIR
from fiberbench.errors import UsageError
from fiberbench.metric.evaluate import model_index
from fiberbench.metric.evaluate.predictions import FORMATS, load_split, read_rows, read_system
from fiberbench.metric.evaluate.report import READ_DIFFERENTLY, leaderboard_markdown, plain_text, write_chart
from fiberbench.metric.evaluate.results import HUMAN_AGREEMENT, MOST_FREQUENT_ANSWER, evaluate_systems
from fiberbench.outputs import (check_output, finish_output, output_lock, read_record, start_output, write_json,
                                write_text)

logger = logging.getLogger(__name__)

COMMAND = "fiberbench evaluate"
RESULTS_FILE, LEADERBOARD_FILE, CHART_FILE = "results.json", "results.md", "by_category.png"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n", 2)[2]
    parser.add_argument("predictions", nargs="+", type=Path, help="Predictions files (.jsonl, .json or .csv).")
    parser.add_argument("--names", nargs="+", help="The systems' names (default: the files' stems, made unique).")
    parser.add_argument("--control", action="append", default=[], metavar="NAME=FILE", help="A system's blind "
                        "control: its predictions without the video (`fiberbench predict --video_input none`), for its "
                        "gain from the video; once per system.")
    parser.add_argument("--release_f1", action="store_true", help="Show F1 as the FIBER release computed it for its "
                        "models (no normalization), to compare with the paper's Table 3; F1 is the one to report.")
    parser.add_argument("--dataset_name", help="A folder built by build-dataset, or a Hub dataset id (default: the "
                        "bundled SYNTHETIC sample).")
    parser.add_argument("--dataset_config_name", default="text", help="The dataset config (text is all scoring needs).")
    parser.add_argument("--split", default="test", help="The split the predictions are for.")
    parser.add_argument("--output_dir", type=Path, help=f"Where {RESULTS_FILE}, {LEADERBOARD_FILE}, {CHART_FILE} go.")
    parser.add_argument("--overwrite_output_dir", action="store_true", help="Replace an earlier run's --output_dir.")
    parser.add_argument("--confidence_level", type=float, default=0.95, help="Of the bootstrap confidence intervals.")
    parser.add_argument("--num_bootstrap", type=positive_int, default=10_000, help="Bootstrap resamples.")
    parser.add_argument("--seed", type=seed, default=0, help="Seed of the bootstrap resamples.")
    parser.add_argument("--model_index", type=Path, metavar="README.md", help="Write the system's scores into this "
                        "model card's `model-index` metadata, which the Hub shows on the model's page (one predictions "
                        "file; an existing card keeps its text and other metadata).")
    parser.add_argument("--with_baselines", action="store_true", help="Add reference rows: the most frequent training "
                        "answer, and human agreement (leave one annotator out).")


def system_names(paths: list[Path], names: list[str] | None) -> list[str]:
    """`--names`, or the files' stems made unique (by their folder's name, then a number); each file once, every name
    UTF-8 text, as results.json and results.md are (bytes that are not reach Python as lone surrogates), and none a
    baseline's (which would take its row)."""
    for given, shown in [(str(path), "{}: the file name") for path in paths] + [(name, "--names: '{}'") for name in
                                                                               names or []]:
        if (text := given.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")) != given:
            raise UsageError(f"{shown.format(text)} is not UTF-8 text, which results.json and results.md must be")
    if names is None:
        stems = [path.stem for path in paths]
        names = [f"{path.parent.name}/{path.stem}" if stems.count(path.stem) > 1 else path.stem for path in paths]
        names = [f"{name} ({names[:i].count(name) + 1})" if names.count(name) > 1 else name
                 for i, name in enumerate(names)]
    elif len(names) != len(paths):
        raise UsageError(f"--names gives {len(names)} names for {len(paths)} predictions files")
    elif len(set(names)) != len(names):
        raise UsageError(f"--names must all be different, got {names}")
    for name in names:
        folded = " ".join(unicodedata.normalize("NFKC", name).casefold().split())
        if folded in (MOST_FREQUENT_ANSWER, HUMAN_AGREEMENT) or folded.endswith("(baseline)"):
            raise UsageError(f"{name!r} names a baseline ({MOST_FREQUENT_ANSWER}, {HUMAN_AGREEMENT}): name the system "
                             "otherwise (--names)")
    # A link or another spelling of a file is that file again: scored twice, a system compared with itself.
    seen = {}
    for index, path in enumerate(paths):
        identity = (path.stat().st_dev, path.stat().st_ino) if path.is_file() else str(path)
        if (first := seen.setdefault(identity, index)) != index:
            raise UsageError(f"{paths[first]} is given twice (as file {first + 1} and, as {path}, file {index + 1}): "
                             "give each predictions file once")
    return names


def control_files(controls: list[str], names: list[str]) -> dict[str, Path]:
    """--control NAME=FILE, each system's blind control: NAME ends at the first '=' after which a system's name ends."""
    found = {}
    for given in controls:
        name = next((given[:end] for end in range(len(given)) if given[end] == "=" and given[:end] in names), None)
        if name is None:
            raise UsageError(f"--control {given!r}: give NAME=FILE, NAME one of the systems: "
                             + ", ".join(map(repr, names)))
        if name in found:
            raise UsageError(f"--control: {name!r} is given two controls; give one")
        found[name] = Path(given[len(name) + 1 :])
    return found


def run(args: argparse.Namespace) -> int:
    names = system_names(args.predictions, args.names)
    controls = control_files(args.control, names)
    if not 0 < args.confidence_level < 1:
        raise UsageError(f"--confidence_level must be between 0 and 1 (e.g. 0.95), got {args.confidence_level}")
    if args.output_dir is None and args.overwrite_output_dir:
        raise UsageError("--overwrite_output_dir needs --output_dir")
    dataset = SAMPLE_DIR if args.dataset_name is None else Path(args.dataset_name)
    inputs = [*args.predictions, *controls.values(), *[dataset] * dataset.is_dir()]
    model_index.check_flag(args.model_index, names, inputs, args.output_dir)
    with contextlib.ExitStack() as stack:
        previous = None
        if args.output_dir is not None:
            stack.enter_context(output_lock(args.output_dir, "--output_dir"))
            previous = check_output(args.output_dir, command=COMMAND, flag="--output_dir", folder=True,
                                    overwrite=args.overwrite_output_dir, inputs=inputs)
        results = score_files(args, names, controls)
        leaderboard = leaderboard_markdown(results)
        print(leaderboard, flush=True)
        if results["readings_differ"]:
            logger.warning(READ_DIFFERENTLY)
        if results["clips_differ"]:
            logger.warning("The systems answered different sets of clips: the ranks and comparisons use the %d blanks "
                           "all of them answered", results["compared_blanks"])
        if args.model_index is not None:
            model_index.write(args.model_index, results)
            logger.info("Wrote the model-index of %s into %s", plain_text(names[0]), plain_text(str(args.model_index)))
        if args.output_dir is None:
            logger.info("No --output_dir: nothing written")
            return 0
        record = start_output(args.output_dir, COMMAND, previous, folder=True)
        write_json(args.output_dir / RESULTS_FILE, results)
        write_text(args.output_dir / LEADERBOARD_FILE, leaderboard)
        if all("by_category" in row for row in results["systems"].values()):
            write_chart(results, args.output_dir / CHART_FILE)
        finish_output(args.output_dir, record)
        logger.info("Wrote %s to %s", ", ".join(record["files"]), args.output_dir)
    return 0


def score_files(args: argparse.Namespace, names: list[str], controls: dict[str, Path]) -> dict:
    """Every predictions file scored as the system `names` says, with its blind control: results.json's content."""
    for path in [*args.predictions, *controls.values()]:  # a missing file or an unknown format before the dataset
        if path.suffix.lower() not in FORMATS or not path.is_file():
            read_rows(path)
    split = load_split(args.dataset_name, args.dataset_config_name, args.split)
    if args.with_baselines and split.train_labels is None:
        raise UsageError(f"--with_baselines needs a train split (for the most frequent answer); {split.described} "
                         "has none")
    if split.dataset["synthetic"]:
        logger.warning("Scoring on SYNTHETIC data (%s): the numbers say nothing about FIBER", split.described)
    systems = [read_system(path, name, split) for path, name in zip(args.predictions, names)]
    for name, path in controls.items():
        if not made_without_video(path):
            logger.warning("%s: its record does not say it was made without the video (`fiberbench predict "
                           "--video_input none`); it stands as the blind control of %s all the same",
                           plain_text(str(path)), plain_text(name))
    blind = {name: read_system(path, f"{name} without the video", split) for name, path in controls.items()}
    settings = {"confidence_level": args.confidence_level, "num_bootstrap": args.num_bootstrap, "seed": args.seed}
    return evaluate_systems(systems, split, settings, args.with_baselines, blind, args.release_f1)


def made_without_video(path: Path) -> bool:
    """Whether the record of a predictions file says `"video_input": "none"` (in its settings or a part of them)."""
    settings = (read_record(path, folder=False) or {}).get("settings")
    parts = [settings, *settings.values()] if isinstance(settings, dict) else []
    return any(isinstance(part, dict) and part.get("video_input") == "none" for part in parts)
