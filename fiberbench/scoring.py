"""`fiberbench evaluate`: score any system's predictions on a FIBER split, with confidence intervals and comparisons.

Each predictions file holds one row per blank of the split (JSON Lines, a JSON array or CSV), keyed
by `video_id`, `video_start_time` and `video_end_time`, with the answer in `prediction` and,
optionally, the ranked `candidates` (in CSV, a JSON-encoded list). training/train.py's
predictions.jsonl is one: its rows of other splits are skipped; so is the samples file that lmms-eval
logs for the FIBER task (--log_samples: `*_samples_fiber_test.jsonl`). The join with the split is strict:
a missing, repeated or unknown blank is an error naming the file and the line. Every score comes
from the metric's own functions, so it equals `evaluate.load("metric/fiber_metric").compute` on
the same inputs, and so do the bootstrap confidence intervals (the same seed draws the same resamples).
"""

import argparse
import contextlib
import csv
import json
import logging
import re
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from fiberbench.cli import positive_int, seed
from fiberbench.errors import DataError, UsageError
from fiberbench.files import atomic_path, write_json, write_text
from fiberbench.ownership import Output

logger = logging.getLogger(__name__)

KEY_FIELDS = ("video_id", "video_start_time", "video_end_time")
RESULTS_FILE, LEADERBOARD_FILE, PLOT_FILE = "results.json", "results.md", "by_category.png"
OUTPUT_ENTRIES = re.compile("|".join(re.escape(name) for name in (RESULTS_FILE, LEADERBOARD_FILE, PLOT_FILE)))
MOST_FREQUENT_ANSWER, HUMAN_AGREEMENT = "most frequent answer", "human agreement"
MISSING_SHOWN = 5  # how many blanks without a prediction an error lists

BlankKey = tuple[str, int, int]


@dataclass
class Split:
    """The blanks being scored, in split order, and the words that name the split in messages."""

    name: str
    described: str
    blanks: list[dict]
    categories: list[str] | None

    def keys(self) -> dict[BlankKey, int]:
        return {tuple(blank[field] for field in KEY_FIELDS): index for index, blank in enumerate(self.blanks)}


@dataclass
class System:
    """One predictions file joined to the split: its answer (and ranked candidates) for every blank, in split order."""

    name: str
    file: str
    predictions: list[str]
    candidates: list[list[str]] | None


def read_rows(path: Path) -> list[tuple[str, object]]:
    """(where, row) of every row of a predictions file, as written: JSON Lines, a JSON array, or CSV."""
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".json", ".csv"):
        raise DataError(f"{path}: cannot tell its format from {suffix or 'no suffix'!r}: use .jsonl, .json or .csv")
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:  # utf-8-sig: a byte-order mark is not data
            if suffix == ".csv":
                reader = csv.DictReader(file)
                repeated = sorted({name for name in reader.fieldnames or [] if reader.fieldnames.count(name) > 1})
                if repeated:
                    raise DataError(f"{path}: the header names column {repeated[0]!r} twice (which one is meant?)")
                return [(f"line {reader.line_num}", row) for row in reader]
            if suffix == ".json":
                try:
                    records = json.load(file, object_pairs_hook=_object_of_distinct_fields)
                except DataError as error:
                    raise DataError(f"{path}: {error}") from None
                if not isinstance(records, list):
                    raise DataError(f"{path}: expected a JSON array of objects, got {type(records).__name__}")
                return [(f"record {index}", record) for index, record in enumerate(records)]
            rows = []
            for number, line in enumerate(file, 1):
                try:
                    rows += [(f"line {number}", _json_value(line))] if line.strip() else []
                except (json.JSONDecodeError, DataError) as error:
                    problem = f"invalid JSON ({error.msg})" if isinstance(error, json.JSONDecodeError) else error
                    raise DataError(f"{path}: line {number}: {problem}") from None
            return rows
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read (more than about 1,000 levels)") from None
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: line {error.lineno}: invalid JSON ({error.msg})") from error
    except csv.Error as error:
        raise DataError(f"{path}: not a readable CSV file ({error})") from error


def _object_of_distinct_fields(pairs: list[tuple[str, object]]) -> dict:
    """json's object_pairs_hook: an object that gives a field twice is an error (json keeps the last silently)."""
    fields = [field for field, _ in pairs]
    repeated = sorted({field for field in fields if fields.count(field) > 1})
    if repeated:
        raise DataError(f"an object gives field {repeated[0]!r} twice (which value is meant?)")
    return dict(pairs)


def _json_value(text: str) -> object:
    """One JSON value whose objects give each field once (a `DataError` otherwise)."""
    return json.loads(text, object_pairs_hook=_object_of_distinct_fields)


def _blank_key(row: dict, where: str) -> BlankKey:
    """The blank a row predicts; times may be text (CSV) but must be whole seconds."""
    for field in (*KEY_FIELDS, "prediction"):
        if field not in row:
            raise DataError(f"{where}: field {field!r} is missing")
    if not isinstance(row["video_id"], str):
        raise DataError(f"{where}: field 'video_id' must be a string, got {type(row['video_id']).__name__}")
    times = []
    for field in KEY_FIELDS[1:]:
        value = row[field]
        value = int(value) if isinstance(value, str) and value.strip().isdigit() else value
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(f"{where}: field {field!r} must be a whole number of seconds, got {row[field]!r}")
        times.append(value)
    return row["video_id"], *times


def _candidates(value, where: str, is_csv: bool) -> list[str]:
    """A row's ranked candidates: a list of strings (in CSV, JSON-encoded)."""
    if is_csv:
        try:
            value = _json_value(value)
        except (json.JSONDecodeError, DataError, RecursionError) as error:
            raise DataError(f"{where}: field 'candidates' must be a JSON list of strings ({error})") from None
    if not isinstance(value, list) or not all(isinstance(candidate, str) for candidate in value):
        raise DataError(f"{where}: field 'candidates' must be a list of strings, got {value!r}")
    return value


def join_predictions(path: Path, rows: list, name: str, split: Split) -> System:
    """The rows of a predictions file joined to the split's blanks: every blank exactly once.

    Rows whose `split` field names another split (train.py writes validation and test rows into
    one predictions.jsonl) are skipped and counted. An empty string is a valid (wrong) answer.
    """
    keys, is_csv = split.keys(), path.suffix.lower() == ".csv"
    predictions, candidates = [None] * len(keys), [None] * len(keys)
    first_seen: dict[BlankKey, str] = {}
    other_splits = 0
    for where, row in rows:
        if not isinstance(row, dict):
            raise DataError(f"{path}: {where}: expected an object, got {type(row).__name__}")
        if row.get("split") not in (None, "", split.name):
            other_splits += 1
            continue
        key = _blank_key(row, f"{path}: {where}")
        if key in first_seen:
            raise DataError(f"{path}: {where}: blank {key} is predicted twice (first on {first_seen[key]})")
        if key not in keys:
            raise DataError(f"{path}: {where}: blank {key} is not in {split.described}")
        if not isinstance(row["prediction"], str):
            got = type(row["prediction"]).__name__
            raise DataError(f"{path}: {where}: field 'prediction' must be a string, got {got}")
        first_seen[key] = where
        predictions[keys[key]] = row["prediction"]
        if row.get("candidates") not in (None, ""):
            candidates[keys[key]] = _candidates(row["candidates"], f"{path}: {where}", is_csv)
    if other_splits:
        logger.info("%s: skipped %d rows of other splits than %s", path, other_splits, split.name)
    missing = [key for key, index in keys.items() if predictions[index] is None]
    if missing:
        shown = ", ".join(map(str, missing[:MISSING_SHOWN])) + (", ..." if len(missing) > MISSING_SHOWN else "")
        counted = f"{len(missing)} of the {len(keys)} blanks of {split.described}"
        raise DataError(f"{path}: no prediction for {counted}: {shown}")
    with_candidates = sum(ranked is not None for ranked in candidates)
    if 0 < with_candidates < len(keys):
        problem = f"{with_candidates} of {len(keys)} rows have 'candidates'"
        raise DataError(f"{path}: {problem}: give them in every row or in none")
    return System(name, str(path), predictions, candidates if with_candidates else None)


def system_names(paths: list[Path], names: list[str] | None) -> list[str]:
    """`--names`, or the files' stems made unique (by their folder's name, then by a number)."""
    if names is not None:
        if len(names) != len(paths):
            raise UsageError(f"--names gives {len(names)} names for {len(paths)} predictions files")
        if len(set(names)) != len(names):
            raise UsageError(f"--names must all be different, got {names}")
        return names
    stems = [path.stem for path in paths]
    names = [f"{path.parent.name}/{path.stem}" if stems.count(path.stem) > 1 else path.stem for path in paths]
    return [f"{name} ({names[:i].count(name) + 1})" if names.count(name) > 1 else name for i, name in enumerate(names)]


def load_split(splits, split_name: str, described: str) -> Split:
    """The blanks of one split, which must have annotators' answers to score against."""
    if split_name not in splits:
        raise UsageError(f"--split {split_name}: {described} has no such split (it has: {', '.join(splits)})")
    dataset = splits[split_name]
    wanted = (*KEY_FIELDS, "label", "additional_answers", "category")
    blanks = dataset.select_columns([column for column in wanted if column in dataset.column_names]).to_list()
    split = Split(split_name, f"the {split_name} split of {described}", blanks, None)
    if not any(blank.get("additional_answers") for blank in blanks):
        raise UsageError(
            f"--split {split_name}: {split.described} has no annotators' answers (additional_answers) to score "
            "against; use validation or test"
        )
    categories = [blank.get("category") for blank in blanks]
    split.categories = categories if all(isinstance(category, str) for category in categories) else None
    return split


def _nest(values: dict) -> dict:
    """{"f1": x, ("correct_at_k", "1"): y} -> {"f1": x, "correct_at_k": {"1": y}}."""
    nested = {}
    for name, value in values.items():
        if isinstance(name, tuple):
            nested.setdefault(name[0], {})[name[1]] = value
        else:
            nested[name] = value
    return nested


def score_columns(system: System, split: Split) -> dict:
    """The per-blank scores behind every mean of the system's leaderboard row, by name (percent)."""
    from fiberbench.metric import references_from_example, score_predictions

    references = [references_from_example(blank) for blank in split.blanks]
    labels = [references_from_example(blank, label_only=True) for blank in split.blanks]
    all_answers = score_predictions(system.predictions, references, per_example=True, candidates=system.candidates)
    label_only = score_predictions(system.predictions, labels, per_example=True)
    columns = {
        "exact_match": all_answers["exact_match_per_example"],
        "f1": all_answers["f1_per_example"],
        "exact_match_label_only": label_only["exact_match_per_example"],
        "f1_label_only": label_only["f1_per_example"],
    }
    if system.candidates is not None:
        columns.update({("correct_at_k", k): column for k, column in all_answers["correct_at_k_per_example"].items()})
        columns["map"] = all_answers["average_precision_per_example"]
    return columns


def _means_and_intervals(rows: dict[str, dict], blanks: list[int], settings: dict) -> dict[str, dict]:
    """Each row's means over `blanks` and their confidence intervals, all columns from the same resamples."""
    import numpy as np

    from fiberbench.metric import confidence_interval, mean_std

    names = [(row, name) for row, columns in rows.items() for name in columns]
    matrix = np.array([[rows[row][name][blank] for blank in blanks] for row, name in names]).reshape(len(names), -1)
    bounds = confidence_interval(matrix.T, **settings).reshape(-1, 2)
    results = {row: ({}, {}) for row in rows}
    for (row, name), scores, (low, high) in zip(names, matrix, bounds):
        means, intervals = results[row]
        means[name], intervals[name] = mean_std(scores.tolist()).mean, [float(low), float(high)]
    return {
        row: {**_nest(means), "confidence_intervals": _nest(intervals)} for row, (means, intervals) in results.items()
    }


def score_rows(rows: dict[str, dict], split: Split, blanks: list[int], settings: dict, progress) -> dict:
    """Each leaderboard row's means, confidence intervals and scores by category, over `blanks` of the split.

    `rows` maps a row to its per-blank columns. One bootstrap serves all the rows, and one each
    category: the resamples depend only on the number of blanks and the seed, so every interval is
    the one `compute(..., confidence_level=...)` gives for that row alone.
    """
    results = _means_and_intervals(rows, blanks, settings)
    progress.update()
    for category in sorted({split.categories[i] for i in blanks}) if split.categories else ():
        in_category = [i for i in blanks if split.categories[i] == category]
        em_f1 = {row: {name: columns[name] for name in ("exact_match", "f1")} for row, columns in rows.items()}
        for row, scores in _means_and_intervals(em_f1, in_category, settings).items():
            results[row].setdefault("by_category", {})[category] = {"count": len(in_category), **scores}
        progress.update()
    return results


def compare_pairs(rows: dict[str, dict], ranked: list[str], settings: dict) -> list[dict]:
    """Every pair of systems (the better-ranked first) on F1 and EM, all pairs from the same resamples and swaps."""
    import numpy as np

    from fiberbench.metric import compare_systems, mcnemar_p_value

    pairs = [(a, b, metric) for a, b in combinations(ranked, 2) for metric in ("f1", "exact_match")]
    if not pairs:
        return []
    scores_a, scores_b = (np.array([rows[pair[side]][pair[2]] for pair in pairs]).T for side in (0, 1))
    compared = compare_systems(scores_a, scores_b, num_permutations=settings["num_bootstrap"], **settings)
    comparisons = []
    for (a, b, metric), comparison in zip(pairs, compared):
        comparisons.append({"systems": [a, b], "metric": metric, **comparison})
        if metric == "exact_match":
            comparisons[-1]["mcnemar_p_value"] = mcnemar_p_value(rows[a][metric], rows[b][metric])
    return comparisons


def human_agreement_columns(split: Split) -> tuple[dict, list[int]]:
    """Per blank, the mean over its annotators of their first answer's scores against the others and the label.

    The human row of the paper's Table 3 (leave one annotator out); blanks where no annotator can
    be scored are left out, and the blanks kept are returned with the columns.
    """
    from fiberbench.metric import human_agreement

    labels = [blank["label"] for blank in split.blanks]
    agreement = human_agreement(labels, [blank["additional_answers"] for blank in split.blanks], per_example=True)
    columns = {metric: agreement[f"first_answers_{metric}_per_caption"] for metric in ("exact_match", "f1")}
    return columns, [index for index, score in enumerate(columns["f1"]) if score is not None]


def evaluate_systems(systems: list[System], split: Split, settings: dict, train_labels: list[str] | None) -> dict:
    """The `systems` and `comparisons` of results.json, and its `baselines` given the training labels."""
    from tqdm.auto import tqdm

    from fiberbench.metric.baselines import most_frequent_answer

    with tqdm(systems, desc="Scoring") as progress:  # closed before an error is printed, so it starts a line
        rows = {system.name: score_columns(system, split) for system in progress}
    every_blank = list(range(len(split.blanks)))
    num_categories = len(set(split.categories)) if split.categories else 0
    with tqdm(total=(1 + num_categories) * (1 if train_labels is None else 2) + 1, desc="Bootstrap") as progress:
        if train_labels is not None:
            answer = most_frequent_answer(train_labels)
            baseline = System(MOST_FREQUENT_ANSWER, "", [answer] * len(every_blank), None)
            rows[MOST_FREQUENT_ANSWER] = score_columns(baseline, split)
        scored = score_rows(rows, split, every_blank, settings, progress)
        ranked = sorted((system.name for system in systems), key=lambda name: -scored[name]["f1"])
        results = {
            "systems": {
                system.name: {"file": system.file, "correct_at_k": None, "map": None, **scored[system.name]}
                for system in systems
            },
            "comparisons": compare_pairs(rows, ranked, settings),
        }
        progress.update()
        if train_labels is not None:
            human_columns, human_blanks = human_agreement_columns(split)
            (human,) = score_rows({HUMAN_AGREEMENT: human_columns}, split, human_blanks, settings, progress).values()
            results["baselines"] = {
                MOST_FREQUENT_ANSWER: {"answer": answer, **scored[MOST_FREQUENT_ANSWER]},
                HUMAN_AGREEMENT: {"num_blanks": len(human_blanks), **human},
            }
    return results


def _cell(row: dict, name: str, key: str | None = None) -> str:
    """A score with its interval, "60.2 [55.1, 65.0]"; "–" where the row has no such score."""
    value, interval = row.get(name), row["confidence_intervals"].get(name)
    if key is not None:
        value, interval = (value or {}).get(key), (interval or {}).get(key)
    return "–" if value is None else f"{value:.1f} [{interval[0]:.1f}, {interval[1]:.1f}]"


def leaderboard_rows(results: dict) -> dict[str, dict]:
    """The systems and baselines, best F1 first; a baseline's name says it is one (and its answer)."""
    rows = dict(results["systems"])
    for name, row in results.get("baselines", {}).items():
        rows[f'{name} "{row["answer"]}" (baseline)' if "answer" in row else f"{name} (baseline)"] = row
    return dict(sorted(rows.items(), key=lambda item: -item[1]["f1"]))


def leaderboard_markdown(results: dict) -> str:
    """results.md: the leaderboard (each score with its confidence interval) and the comparisons of every pair."""
    dataset, settings = results["dataset"], results["settings"]
    level = f"{100 * settings['confidence_level']:g}%"
    lines = [f"# FIBER: the {dataset['split']} split of {dataset['name']} (config {dataset['config']})", ""]
    if dataset["synthetic"]:
        lines += ["**SYNTHETIC data** (the bundled sample, or a build of it): the numbers say nothing about FIBER.", ""]
    lines += [
        f"{dataset['num_blanks']} blanks. Scores in percent, each with its {level} confidence interval [low, high] "
        f"(percentile bootstrap over the blanks, {settings['num_bootstrap']:,} resamples, seed {settings['seed']}).",
        "",
        "| rank | system | F1 | EM | F1, label only | EM, label only | Correct@1 | MAP |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rank, (name, row) in enumerate(leaderboard_rows(results).items(), start=1):
        cells = [_cell(row, score) for score in ("f1", "exact_match", "f1_label_only", "exact_match_label_only")]
        cells += [_cell(row, "correct_at_k", "1"), _cell(row, "map")]
        lines.append(f"| {rank} | {name} | {' | '.join(cells)} |")
    if HUMAN_AGREEMENT in results.get("baselines", {}):
        lines += [
            "",
            "Human agreement: per blank, the mean over its annotators of their first answer scored against the other "
            "annotators and the label (leave one annotator out, the human row of the paper's Table 3), on the "
            f"{results['baselines'][HUMAN_AGREEMENT]['num_blanks']} blanks with an annotator to score.",
        ]
    if results["comparisons"]:
        trials = settings["num_permutations"]
        lines += [
            "",
            "## Comparisons",
            "",
            f"A - B on the same blanks, with its paired bootstrap {level} interval. p: two-sided, by approximate "
            f"randomization ({trials:,} trials, so never below {1 / (trials + 1):.1g}); for EM also by McNemar's "
            "exact test.",
            "",
            "| A | B | metric | A - B | interval | p | p, McNemar |",
            "|---|---|---|---|---|---|---|",
        ]
        for comparison in results["comparisons"]:
            low, high = comparison["difference_ci"]
            mcnemar = comparison.get("mcnemar_p_value")
            cells = [
                *comparison["systems"],
                "F1" if comparison["metric"] == "f1" else "EM",
                f"{comparison['difference']:+.1f}",
                f"[{low:+.1f}, {high:+.1f}]",
                f"{comparison['p_value']:.2g}",
                "" if mcnemar is None else f"{mcnemar:.2g}",
            ]
            lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def plot_size(num_categories: int, num_bars: int) -> tuple[float, float]:
    """by_category.png's size in inches, at 100 dpi: wide enough for the value over every bar."""
    return max(8.0, 2.0 + num_categories * (0.5 * num_bars + 0.6)), 6.5


def plot_by_category(results: dict, path: Path) -> bool:
    """by_category.png: F1 by category, one bar per leaderboard row with CI whiskers (False: no matplotlib)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (`pip install fiber-benchmark[plots]`)", path.name)
        return False
    import numpy as np

    rows = leaderboard_rows(results)
    counts = {}
    for row in rows.values():
        counts.update({category: scores["count"] for category, scores in row["by_category"].items()})
    categories = sorted(counts)
    figure = Figure(figsize=plot_size(len(categories), len(rows)), dpi=100, layout="constrained")
    ax = figure.subplots()
    width = 0.8 / len(rows)
    for index, (name, row) in enumerate(rows.items()):
        scores = [row["by_category"].get(category) for category in categories]
        values = np.array([score["f1"] if score else np.nan for score in scores])
        intervals = np.array([score["confidence_intervals"]["f1"] if score else [np.nan] * 2 for score in scores])
        x = np.arange(len(categories)) + (index - (len(rows) - 1) / 2) * width
        whiskers = [values - intervals[:, 0], intervals[:, 1] - values]
        ax.bar(x, values, width, label=name, yerr=whiskers, capsize=2, error_kw={"ecolor": "0.3", "elinewidth": 1})
        for position, value, high in zip(x, values, intervals[:, 1]):
            if not np.isnan(value):
                ax.text(position, high + 1, f"{value:.0f}", ha="center", va="bottom", fontsize=7)
    dataset = results["dataset"]
    level = f"{100 * results['settings']['confidence_level']:g}%"
    synthetic = " (SYNTHETIC data)" if dataset["synthetic"] else ""
    ax.set_title(f"F1 by category, {dataset['split']} split of {dataset['name']}{synthetic}; whiskers: {level} CIs")
    ax.set_xticks(np.arange(len(categories)), [f"{category}\n({counts[category]} blanks)" for category in categories])
    ax.set_xlabel("category of the blanked phrase")
    ax.set_ylabel("F1 (%)")
    ax.set_ylim(0, 108)
    ax.grid(axis="y", alpha=0.3)
    figure.legend(loc="outside lower center", ncols=min(len(rows), 4), fontsize=8)
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100)
    return True


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
        "--with_baselines",
        action="store_true",
        help="Add reference rows: the most frequent training answer, and human agreement (leave one annotator out).",
    )


def check_flags(args: argparse.Namespace) -> Output | None:
    """Refuse, before any work, flag values that cannot work and an output that would overwrite something.

    Returns the output folder to write (None without --output_dir).
    """
    if not 0 < args.confidence_level < 1:
        raise UsageError(f"--confidence_level must be between 0 and 1 (e.g. 0.95), got {args.confidence_level}")
    if args.output_dir is None:
        if args.overwrite_output_dir:
            raise UsageError("--overwrite_output_dir needs --output_dir")
        return None
    from fiberbench.data import SAMPLE_DIR

    dataset = SAMPLE_DIR if args.dataset_name is None else Path(args.dataset_name)
    output = Output(
        args.output_dir,
        command="fiberbench evaluate",
        flag="--output_dir",
        overwrite=args.overwrite_output_dir,
        overwrite_flag="--overwrite_output_dir",
        folder=True,
        entry_names=OUTPUT_ENTRIES,
    )
    output.check([*args.predictions, dataset if dataset.is_dir() else None])
    return output


def run(args: argparse.Namespace) -> int:
    output = check_flags(args)
    with contextlib.ExitStack() as stack:
        if output is not None:
            stack.enter_context(output.lock())
        return score_and_write(args, output)


def score_and_write(args: argparse.Namespace, output: Output | None) -> int:
    """Score every predictions file; print the leaderboard and write the results into `output` (if any)."""
    from fiberbench.data import load_fiber
    from fiberbench.data.provenance import is_synthetic

    names = system_names(args.predictions, args.names)
    rows_by_file = {path: read_rows(path) for path in args.predictions}
    described = "the bundled sample" if args.dataset_name is None else args.dataset_name
    splits = load_fiber(args.dataset_name, args.dataset_config_name)
    split = load_split(splits, args.split, described)
    if args.with_baselines and "train" not in splits:
        raise UsageError(f"--with_baselines needs a train split (for the most frequent answer); {described} has none")
    synthetic = is_synthetic(args.dataset_name)
    if synthetic:
        logger.warning("Scoring on SYNTHETIC data (%s): the numbers say nothing about FIBER", described)
    systems = [join_predictions(path, rows, name, split) for (path, rows), name in zip(rows_by_file.items(), names)]

    settings = {"confidence_level": args.confidence_level, "num_bootstrap": args.num_bootstrap, "seed": args.seed}
    train_labels = splits["train"]["label"] if args.with_baselines else None
    results = {
        "dataset": {
            "name": args.dataset_name or "the bundled sample",
            "config": args.dataset_config_name,
            "split": args.split,
            "num_blanks": len(split.blanks),
            "synthetic": synthetic,
        },
        "settings": {**settings, "num_permutations": args.num_bootstrap},
        **evaluate_systems(systems, split, settings, train_labels),
    }
    leaderboard = leaderboard_markdown(results)
    print(leaderboard, flush=True)
    if output is None:
        logger.info("No --output_dir: nothing written")
        return 0
    with output.atomic_folder() as staging:
        write_json(staging / RESULTS_FILE, results)
        write_text(staging / LEADERBOARD_FILE, leaderboard)
        plotted = split.categories is not None and plot_by_category(results, staging / PLOT_FILE)
    written = [RESULTS_FILE, LEADERBOARD_FILE] + ([PLOT_FILE] if plotted else [])
    logger.info("Wrote %s to %s", ", ".join(written), args.output_dir)
    return 0
