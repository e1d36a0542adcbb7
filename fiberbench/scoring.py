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
import csv
import gc
import hashlib
import json
import logging
import math
import re
import unicodedata
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from fiberbench.cli import positive_int, seed
from fiberbench.errors import DataError, UsageError
from fiberbench.files import atomic_path, file_identity, write_json, write_text
from fiberbench.ownership import Output
from fiberbench.predictions import KEY_FIELDS

logger = logging.getLogger(__name__)

RESULTS_FILE, LEADERBOARD_FILE, PLOT_FILE = "results.json", "results.md", "by_category.png"
OUTPUT_ENTRIES = re.compile("|".join(re.escape(name) for name in (RESULTS_FILE, LEADERBOARD_FILE, PLOT_FILE)))
MOST_FREQUENT_ANSWER, HUMAN_AGREEMENT = "most frequent answer", "human agreement"
MISSING_SHOWN = 5  # how many blanks without a prediction an error lists
FORMATS = (".jsonl", ".json", ".csv")

BlankKey = tuple[str, int, int]


@dataclass
class Split:
    """The blanks being scored, in split order: their keys, categories and correct answers, and the words that name
    the split in messages.

    `answers` and `labels` are the metric's `CorrectAnswers` (the label and every annotator's answers;
    the label alone), normalized once for every system; `human_agreement` the human row's per-blank
    columns and the blanks it scores, when asked for. The annotators' raw answers are not kept.
    """

    name: str
    described: str
    keys: list[BlankKey]
    categories: list[str] | None
    answers: object
    labels: object
    human_agreement: tuple[dict, list[int]] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def index(self) -> dict[BlankKey, int]:
        """Each blank's key -> its row; a key given twice is a `DataError` naming both rows."""
        rows: dict[BlankKey, int] = {}
        for row, key in enumerate(self.keys):
            first = rows.setdefault(key, row)
            if first != row:
                raise DataError(
                    f"{self.described} holds the clip {key} twice, in rows {first} and {row}: a blank is known by "
                    "its clip, so predictions cannot be joined to it (build-dataset refuses such data)"
                )
        return rows


@dataclass
class System:
    """One predictions file joined to the split: its answer (and ranked candidates) for every blank, in split order."""

    name: str
    file: str
    predictions: list[str]
    candidates: list[list[str]] | None
    reading: dict | None = None  # how the answers were read from replies, where the file records it


def read_rows(path: Path) -> list[tuple[str, object]]:
    """(where, row) of every row of a predictions file, as written: JSON Lines, a JSON array, or CSV."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"{path}: cannot tell its format from {suffix or 'no suffix'!r}: use .jsonl, .json or .csv")
    from fiberbench.data.json_records import too_long_integer

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
                    records = _DECODER.decode(file.read())
                except DataError as error:
                    raise DataError(f"{path}: {error}") from None
                except ValueError as error:
                    if isinstance(error, json.JSONDecodeError):
                        raise
                    raise DataError(f"{path}: {too_long_integer()}") from None
                if not isinstance(records, list):
                    raise DataError(f"{path}: expected a JSON array of objects, got {type(records).__name__}")
                return [(f"record {index}", record) for index, record in enumerate(records)]
            rows = []
            for number, line in enumerate(file, 1):
                try:
                    rows += [(f"line {number}", _json_value(line))] if line.strip() else []
                except (ValueError, DataError) as error:
                    if isinstance(error, json.JSONDecodeError):
                        problem = f"invalid JSON ({error.msg})"
                    else:  # a DataError of ours, or Python refusing an integer of more than 4,300 digits
                        problem = error if isinstance(error, DataError) else too_long_integer()
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
    fields = dict(pairs)
    if len(fields) < len(pairs):
        names = [field for field, _ in pairs]
        repeated = sorted({field for field in names if names.count(field) > 1})
        raise DataError(f"an object gives field {repeated[0]!r} twice (which value is meant?)")
    return fields


_DECODER = json.JSONDecoder(object_pairs_hook=_object_of_distinct_fields)


def _json_value(text: str) -> object:
    """One JSON value whose objects give each field once (a `DataError` otherwise)."""
    return _DECODER.decode(text)


def _blank_key(row: dict, path: Path, where: str, whole_seconds) -> BlankKey:
    """The blank a row predicts; times may be text (CSV) but must be whole seconds (`whole_seconds`, the dataset's
    definition of a time)."""
    for field in (*KEY_FIELDS, "prediction"):
        if field not in row:
            raise DataError(f"{path}: {where}: field {field!r} is missing")
    if not isinstance(row["video_id"], str):
        raise DataError(f"{path}: {where}: field 'video_id' must be a string, got {type(row['video_id']).__name__}")
    times = []
    for field in KEY_FIELDS[1:]:
        try:
            times.append(whole_seconds(row[field], text=True))
        except ValueError as error:
            raise DataError(f"{path}: {where}: field {field!r} {error}") from None
    return row["video_id"], *times


def _candidates(value, path: Path, where: str, is_csv: bool) -> list[str]:
    """A row's ranked candidates: a list of strings (in CSV, JSON-encoded)."""
    if is_csv:
        try:
            value = _json_value(value)
        except (ValueError, DataError, RecursionError) as error:
            raise DataError(f"{path}: {where}: field 'candidates' must be a JSON list of strings ({error})") from None
    if not isinstance(value, list) or not all(isinstance(candidate, str) for candidate in value):
        raise DataError(f"{path}: {where}: field 'candidates' must be a list of strings, got {value!r}")
    return value


def join_predictions(path: Path, rows: list, name: str, split: Split, keys: dict[BlankKey, int]) -> System:
    """The rows of a predictions file joined to the split's blanks (`keys`: `Split.index()`): every blank exactly once.

    Rows whose `split` field names another split (train.py writes validation and test rows into
    one predictions.jsonl) are skipped and counted. An empty string is a valid (wrong) answer.
    """
    from fiberbench.data.fiber.validation import whole_seconds

    is_csv = path.suffix.lower() == ".csv"
    predictions, candidates = [None] * len(keys), [None] * len(keys)
    first_seen: dict[BlankKey, str] = {}
    other_splits = 0
    for where, row in rows:
        if not isinstance(row, dict):
            raise DataError(f"{path}: {where}: expected an object, got {type(row).__name__}")
        if row.get("split") not in (None, "", split.name):
            other_splits += 1
            continue
        key = _blank_key(row, path, where, whole_seconds)
        if key in first_seen:
            raise DataError(f"{path}: {where}: blank {key} is predicted twice (first on {first_seen[key]})")
        index = keys.get(key)
        if index is None:
            raise DataError(f"{path}: {where}: blank {key} is not in {split.described}")
        if not isinstance(row["prediction"], str):
            got = type(row["prediction"]).__name__
            raise DataError(f"{path}: {where}: field 'prediction' must be a string, got {got}")
        first_seen[key] = where
        predictions[index] = row["prediction"]
        if row.get("candidates") not in (None, ""):
            candidates[index] = _candidates(row["candidates"], path, where, is_csv)
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


def recorded_reading(path: Path, rows: list) -> dict | None:
    """How the answers of a predictions file were read from a model's replies (`reader_settings`), where it says:
    `settings.reader` of `fiberbench predict`'s metadata beside it, or the `reader` that every lmms-eval sample
    carries. None where nothing is recorded, or the model answered in the paper's format."""
    from fiberbench.ownership import record_path

    metadata_file = record_path(path, folder=False)
    if metadata_file.is_file():
        try:
            metadata = json.loads(metadata_file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(f"{metadata_file}: not valid JSON ({error})") from error
        if isinstance(metadata, dict) and metadata.get("written_by") == "fiberbench predict":
            reader = (metadata.get("settings") or {}).get("reader") if isinstance(metadata.get("settings"), dict) else None
            if reader is not None and not isinstance(reader, dict):
                raise DataError(f"{metadata_file}: field 'settings.reader' must be an object, got {type(reader).__name__}")
            return reader
    carried = [(where, row["reader"]) for where, row in rows if isinstance(row, dict) and "reader" in row]
    if not carried:
        return None
    first_where, first = carried[0]
    for where, reader in carried:
        if not isinstance(reader, dict):
            raise DataError(f"{path}: {where}: field 'reader' must be an object, got {type(reader).__name__}")
        if reader != first:
            raise DataError(f"{path}: {where}: field 'reader' differs from {first_where}'s: one file, one reading")
    if len(carried) < len(rows):
        raise DataError(f"{path}: {len(carried)} of {len(rows)} rows have 'reader': give it in every row or in none")
    return first


def reading_lines(results: dict) -> list[str]:
    """results.md's lines on how each system's answers were read from replies (none when no file says), and one that
    says so when the systems were read differently."""
    from fiberbench.replies import describe_reading

    read = {name: row["reading"] for name, row in results["systems"].items() if row.get("reading") is not None}
    if not read:
        return []
    lines = ["", "Answers read from the models' replies by fiberbench's answer reader:", ""]
    lines += [f"- {markdown_text(name)}: {describe_reading(reading)}" for name, reading in read.items()]
    if results.get("readings_differ"):
        lines += ["", f"**{READ_DIFFERENTLY}**"]
    return lines


READ_DIFFERENTLY = (
    "The systems' replies were read differently (see above): part of a difference between them may be the reading's."
)


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


def load_split(splits, split_name: str, described: str, with_human_agreement: bool = False) -> Split:
    """The blanks of one split, which must have annotators' answers to score against.

    With `with_human_agreement`, the human row's columns are computed too, while the annotators'
    raw answers are at hand (they are then let go: 100,000 blanks' answers are about 300 MB).
    """
    if split_name not in splits:
        raise UsageError(f"--split {split_name}: {described} has no such split (it has: {', '.join(splits)})")
    dataset = splits[split_name]
    wanted = (*KEY_FIELDS, "label", "additional_answers", "category")
    # Whole Arrow columns to Python at once: row by row (`to_list`) took 5 s for 100,000 blanks.
    table = dataset.select_columns([column for column in wanted if column in dataset.column_names])
    table = table.with_format("arrow")[:]
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    answers = [annotators or [] for annotators in columns.get("additional_answers") or [None] * table.num_rows]
    described = f"the {split_name} split of {described}"
    if not any(answers):
        raise UsageError(
            f"--split {split_name}: {described} has no annotators' answers (additional_answers) to score "
            "against; use validation or test"
        )
    categories = columns.get("category") or [None]
    return Split(
        split_name,
        described,
        list(zip(*(columns[field] for field in KEY_FIELDS))),
        categories if all(isinstance(category, str) for category in categories) else None,
        *correct_answers(columns["label"], answers),
        human_agreement_columns(columns["label"], answers) if with_human_agreement else None,
    )


def _nest(values: dict) -> dict:
    """{"f1": x, ("correct_at_k", "1"): y} -> {"f1": x, "correct_at_k": {"1": y}}."""
    nested = {}
    for name, value in values.items():
        if isinstance(name, tuple):
            nested.setdefault(name[0], {})[name[1]] = value
        else:
            nested[name] = value
    return nested


def correct_answers(labels: list[str], additional_answers: list) -> tuple:
    """Blanks' correct answers as the metric takes them (`CorrectAnswers`, normalized once for every system): the
    label and every annotator's answers, and the label alone."""
    from fiberbench.metric import CorrectAnswers, references_from_example

    examples = [{"label": label, "additional_answers": answers} for label, answers in zip(labels, additional_answers)]
    all_answers = CorrectAnswers([references_from_example(example) for example in examples])
    return all_answers, CorrectAnswers([references_from_example(example, label_only=True) for example in examples])


def score_columns(system: System, split: Split) -> dict:
    """The per-blank scores behind every mean of the system's leaderboard row, by name (percent), as arrays."""
    import numpy as np

    all_answers = split.answers.score(system.predictions, system.candidates)
    label_only = split.labels.score(system.predictions)
    columns = {
        "exact_match": all_answers["exact_match"],
        "f1": all_answers["f1"],
        "exact_match_label_only": label_only["exact_match"],
        "f1_label_only": label_only["f1"],
    }
    if system.candidates is not None:
        columns.update({("correct_at_k", k): column for k, column in all_answers["correct_at_k"].items()})
        columns["map"] = all_answers["average_precision"]
    return {name: np.asarray(column, dtype=float) for name, column in columns.items()}


def _means_and_intervals(rows: dict[str, dict], blanks, settings: dict) -> dict[str, dict]:
    """Each row's means over `blanks` (an index array; None: every blank) and their confidence intervals."""
    import numpy as np

    from fiberbench.metric import confidence_interval, mean_std

    names = [(row, name) for row, columns in rows.items() for name in columns]
    matrix = np.stack([rows[row][name] if blanks is None else rows[row][name][blanks] for row, name in names], axis=1)
    bounds = confidence_interval(matrix, **settings).reshape(-1, 2)
    results = {row: ({}, {}) for row in rows}
    for (row, name), scores, (low, high) in zip(names, matrix.T, bounds):
        means, intervals = results[row]
        means[name], intervals[name] = mean_std(scores.tolist()).mean, [float(low), float(high)]
    return {
        row: {**_nest(means), "confidence_intervals": _nest(intervals)} for row, (means, intervals) in results.items()
    }


def score_rows(rows: dict[str, dict], split: Split, blanks, settings: dict, progress) -> dict:
    """Each leaderboard row's means, confidence intervals and scores by category, over `blanks` of the split.

    `rows` maps a row to its per-blank columns; `blanks` is an index array (None: every blank).
    Each interval depends only on its own scores and the seed, so it is the one
    `compute(..., confidence_level=...)` gives for that row alone (a category's, for its blanks).
    """
    import numpy as np

    results = _means_and_intervals(rows, blanks, settings)
    progress.update()
    if split.categories is None:
        return results
    kept = np.arange(len(split)) if blanks is None else np.asarray(blanks)
    categories = np.asarray(split.categories, dtype=object)[kept]
    for category in sorted(set(categories)):
        in_category = kept[categories == category]
        em_f1 = {row: {name: columns[name] for name in ("exact_match", "f1")} for row, columns in rows.items()}
        for row, scores in _means_and_intervals(em_f1, in_category, settings).items():
            results[row].setdefault("by_category", {})[category] = {"count": len(in_category), **scores}
        progress.update()
    return results


def compare_pairs(rows: dict[str, dict], ranked: list[str], settings: dict) -> list[dict]:
    """Every pair of systems (the better-ranked first) on F1 and EM, as `compare_systems` compares one pair."""
    import numpy as np

    from fiberbench.metric import compare_systems, mcnemar_p_value

    pairs = [(a, b, metric) for a, b in combinations(ranked, 2) for metric in ("f1", "exact_match")]
    if not pairs:
        return []
    scores_a, scores_b = (np.stack([rows[pair[side]][pair[2]] for pair in pairs], axis=1) for side in (0, 1))
    compared = compare_systems(scores_a, scores_b, num_permutations=settings["num_bootstrap"], **settings)
    comparisons = []
    for (a, b, metric), comparison in zip(pairs, compared):
        comparisons.append({"systems": [a, b], "metric": metric, **comparison})
        if metric == "exact_match":
            comparisons[-1]["mcnemar_p_value"] = mcnemar_p_value(rows[a][metric], rows[b][metric])
    return comparisons


def human_agreement_columns(labels: list[str], additional_answers: list) -> tuple[dict, list[int]]:
    """Per blank, the mean over its annotators of their first answer's scores against the others and the label.

    The human row of the paper's Table 3 (leave one annotator out); blanks where no annotator can
    be scored are left out, and the blanks kept are returned with the columns.
    """
    import numpy as np

    from fiberbench.metric import human_agreement

    agreement = human_agreement(labels, additional_answers, per_example=True, first_answers_only=True)
    scores = {metric: agreement[f"first_answers_{metric}_per_caption"] for metric in ("exact_match", "f1")}
    kept = [index for index, score in enumerate(scores["f1"]) if score is not None]
    columns = {metric: np.array([0.0 if score is None else score for score in column]) for metric, column in scores.items()}
    return columns, kept


def evaluate_systems(systems: list[System], split: Split, settings: dict, train_labels: list[str] | None) -> dict:
    """The `systems` and `comparisons` of results.json, and its `baselines` given the training labels."""
    from tqdm.auto import tqdm

    from fiberbench.metric.baselines import most_frequent_answer

    with tqdm(systems, desc="Scoring") as progress:  # closed before an error is printed, so it starts a line
        rows = {system.name: score_columns(system, split) for system in progress}
    num_categories = len(set(split.categories)) if split.categories else 0
    with tqdm(total=(1 + num_categories) * (1 if train_labels is None else 2) + 1, desc="Bootstrap") as progress:
        if train_labels is not None:
            answer = most_frequent_answer(train_labels)
            baseline = System(MOST_FREQUENT_ANSWER, "", [answer] * len(split), None)
            rows[MOST_FREQUENT_ANSWER] = score_columns(baseline, split)
        scored = score_rows(rows, split, None, settings, progress)
        ranked = sorted((system.name for system in systems), key=lambda name: -scored[name]["f1"])
        results = {
            "systems": {
                system.name: {
                    "file": system.file,
                    "reading": system.reading,
                    "correct_at_k": None,
                    "map": None,
                    **scored[system.name],
                }
                for system in systems
            },
            "readings_differ": len({json.dumps(s.reading, sort_keys=True) for s in systems if s.reading}) > 1,
            "comparisons": compare_pairs(rows, ranked, settings),
        }
        progress.update()
        if train_labels is not None:
            human_columns, human_blanks = split.human_agreement
            (human,) = score_rows({HUMAN_AGREEMENT: human_columns}, split, human_blanks, settings, progress).values()
            results["baselines"] = {
                MOST_FREQUENT_ANSWER: {"answer": answer, **scored[MOST_FREQUENT_ANSWER]},
                HUMAN_AGREEMENT: {"num_blanks": len(human_blanks), **human},
            }
    return results


# Characters that would make a table cell, a link, emphasis, code or HTML of a name in Markdown.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*|<>\[\]])")


def markdown_text(text: str) -> str:
    """`text` as it should show inside one line (a table cell, a title) of Markdown: runs of white space,
    line breaks included, become one space, control characters become U+FFFD, and the characters that
    would make a cell, a link, emphasis, code or HTML are escaped.

    >>> markdown_text("A | B\\n*new* row")
    'A \\\\| B \\\\*new\\\\* row'
    """
    line = "".join("\ufffd" if unicodedata.category(char) == "Cc" else char for char in " ".join(text.split()))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", line)


def p_value_text(p_value: float, num_permutations: int) -> str:
    """A randomization p-value for results.md: "0.034", or "<0.0001" when no trial was as extreme.

    The test's p is (trials as extreme + 1) / (trials + 1), so never below 1 / (trials + 1): at that
    floor the true p is smaller, and "<" the floor (rounded up to one significant digit) says so.

    >>> p_value_text(0.5, 10_000), p_value_text(1 / 10_001, 10_000), p_value_text(1 / 501, 500)
    ('0.5', '<0.0001', '<0.002')
    """
    floor = 1 / (num_permutations + 1)
    if p_value > floor * (1 + 1e-9):
        return f"{p_value:.2g}"
    exponent = math.floor(math.log10(floor))
    digit = math.ceil(round(floor / 10**exponent, 9))
    exponent, digit = (exponent + 1, 1) if digit == 10 else (exponent, digit)
    return f"<{digit * 10.0**exponent:.{max(0, -exponent)}f}"


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
    """results.md: the leaderboard (each score with its confidence interval) and the comparisons of every pair.

    Names (of systems, files, the dataset, the baseline's answer) go through `markdown_text`.
    """
    dataset, settings = results["dataset"], results["settings"]
    level = f"{100 * settings['confidence_level']:g}%"
    title = f"the {dataset['split']} split of {dataset['name']} (config {dataset['config']})"
    lines = [f"# FIBER: {markdown_text(title)}", ""]
    if dataset["synthetic"]:
        lines += ["**SYNTHETIC data** (the bundled sample, or a build of it): the numbers say nothing about FIBER.", ""]
    lines += [
        f"{dataset['num_blanks']} blanks. Scores in percent, each with its {level} confidence interval [low, high] "
        f"(percentile bootstrap over the blanks, {settings['num_bootstrap']:,} resamples, seed {settings['seed']}).",
        "",
        f"**How to read a confidence interval.** [low, high] holds the scores the system would likely get on "
        f"another set of as many blanks like these ({level} of the resampled sets score in it); two systems whose "
        "intervals overlap may still differ: the comparisons below say whether they do.",
        "",
        "| rank | system | F1 | EM | F1, label only | EM, label only | Correct@1 | MAP |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rank, (name, row) in enumerate(leaderboard_rows(results).items(), start=1):
        cells = [_cell(row, score) for score in ("f1", "exact_match", "f1_label_only", "exact_match_label_only")]
        cells += [_cell(row, "correct_at_k", "1"), _cell(row, "map")]
        lines.append(f"| {rank} | {markdown_text(name)} | {' | '.join(cells)} |")
    if HUMAN_AGREEMENT in results.get("baselines", {}):
        lines += [
            "",
            "Human agreement: per blank, the mean over its annotators of their first answer scored against the other "
            "annotators and the label (leave one annotator out, the human row of the paper's Table 3), on the "
            f"{results['baselines'][HUMAN_AGREEMENT]['num_blanks']} blanks with an annotator to score.",
        ]
    lines += reading_lines(results)
    if results["comparisons"]:
        trials = settings["num_permutations"]
        lines += [
            "",
            "## Comparisons",
            "",
            f"A - B on the same blanks, with its paired bootstrap {level} interval. p: two-sided, by approximate "
            f"randomization ({trials:,} trials, so never below {1 / (trials + 1):.1g}: at that floor it shows as "
            f"{p_value_text(1 / (trials + 1), trials)}); for EM also by McNemar's exact test.",
            "",
            "**How to read a p-value.** p is how often a difference at least as large as A - B comes up when the two "
            "systems' answers are swapped at random blank by blank, as if they were equally good: below 0.05, the "
            "difference is unlikely to be luck of the blanks.",
            "",
            "| A | B | metric | A - B | interval | p | p, McNemar |",
            "|---|---|---|---|---|---|---|",
        ]
        for comparison in results["comparisons"]:
            low, high = comparison["difference_ci"]
            mcnemar = comparison.get("mcnemar_p_value")
            cells = [
                *map(markdown_text, comparison["systems"]),
                "F1" if comparison["metric"] == "f1" else "EM",
                f"{comparison['difference']:+.1f}",
                f"[{low:+.1f}, {high:+.1f}]",
                p_value_text(comparison["p_value"], trials),
                "" if mcnemar is None else f"{mcnemar:.2g}",
            ]
            lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


# The systems' colours (matplotlib's tab10 without its grey, which is the baselines'): a system's is picked
# by its name (`system_colours`), so it keeps it from run to run whatever its rank.
SYSTEM_PALETTE = (
    "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"
)
# Baselines are grey and hatched, apart from the systems: (colour, hatch).
BASELINE_STYLES = {MOST_FREQUENT_ANSWER: ("0.6", "//"), HUMAN_AGREEMENT: ("0.85", "..")}
PLOT_METRICS = {"f1": "F1", "exact_match": "EM"}


def system_colours(names: list[str]) -> dict[str, str]:
    """Each system's colour, from its name alone: a name hashes (SHA-256) to a slot of `SYSTEM_PALETTE`, and names
    meeting in one slot take the next free ones, in the names' order. Colours repeat only past nine systems.

    >>> colours = system_colours(["T5 + I3D", "T5 text-only"])
    >>> colours == system_colours(["T5 text-only", "T5 + I3D"]) and len(set(colours.values())) == 2
    True
    """
    colours, free = {}, list(range(len(SYSTEM_PALETTE)))
    for name in sorted(names):
        if not free:
            free = list(range(len(SYSTEM_PALETTE)))
        slot = int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % len(SYSTEM_PALETTE)
        slot = min(free, key=lambda candidate: (candidate - slot) % len(SYSTEM_PALETTE))
        free.remove(slot)
        colours[name] = SYSTEM_PALETTE[slot]
    return colours


def plot_layout(num_categories: int, num_bars: int) -> tuple[int, int, float, float]:
    """by_category.png's panels (rows, columns) and size in inches, at 100 dpi: EM beside F1 while a panel fits in
    10 inches with room for the value over every bar, one above the other past that."""
    panel = max(5.0, 1.2 + num_categories * (0.34 * num_bars + 0.45))
    return (1, 2, 2 * panel + 0.4, 6.8) if panel <= 10 else (2, 1, panel, 12.0)


def category_figure(results: dict):
    """by_category.png's figure: F1 and EM by category, a bar per leaderboard row with its confidence interval.

    Each system has the colour of its name (`system_colours`); baselines are grey and hatched. A
    whisker runs from the interval's low to its high end with caps, so an interval of width 0 (a bar
    at 0 with no resample above it) still shows, and one that does not hold the mean (few resamples)
    is drawn as it is.
    """
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = leaderboard_rows(results)
    baselines = {
        f'{name} "{row["answer"]}" (baseline)' if "answer" in row else f"{name} (baseline)": name
        for name, row in results.get("baselines", {}).items()
    }
    colours = system_colours(list(results["systems"]))
    styles = {
        name: BASELINE_STYLES[baselines[name]] if name in baselines else (colours[name], None) for name in rows
    }
    counts = {}
    for row in rows.values():
        counts.update({category: scores["count"] for category, scores in row["by_category"].items()})
    categories = sorted(counts)
    num_rows, num_columns, width, height = plot_layout(len(categories), len(rows))
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    axes = figure.subplots(num_rows, num_columns, sharey=True, squeeze=False).ravel()
    bar_width = 0.8 / len(rows)
    for ax, (metric, metric_name) in zip(axes, PLOT_METRICS.items()):
        for index, (name, row) in enumerate(rows.items()):
            colour, hatch = styles[name]
            scores = [row["by_category"].get(category) for category in categories]
            values = np.array([score[metric] if score else np.nan for score in scores])
            low, high = np.array([score["confidence_intervals"][metric] if score else [np.nan] * 2 for score in scores]).T
            x = np.arange(len(categories)) + (index - (len(rows) - 1) / 2) * bar_width
            ax.bar(x, values, bar_width, color=colour, hatch=hatch, edgecolor="0.25", linewidth=0.6, label=name)
            ax.errorbar(x, (low + high) / 2, yerr=(high - low) / 2, fmt="none", ecolor="0.15", elinewidth=1.2, capsize=3)
            for position, value, top in zip(x, values, high):
                if not np.isnan(value):
                    ax.text(position, max(top, value) + 1.5, f"{value:.0f}", ha="center", va="bottom", fontsize=9)
        ax.set_title(f"{metric_name} by category", fontsize=14)
        ax.set_xticks(np.arange(len(categories)), [f"{category}\n({counts[category]:,} blanks)" for category in categories])
        ax.tick_params(labelsize=11)
        ax.set_xlabel("category of the blanked phrase", fontsize=12)
        ax.set_ylabel(f"{metric_name} (%)", fontsize=12)
        ax.set_ylim(-4, 112)  # below 0: the caps of a whisker at 0 stand clear of the axis
        ax.set_yticks(range(0, 101, 20))
        ax.grid(axis="y", alpha=0.3)
    dataset = results["dataset"]
    level = f"{100 * results['settings']['confidence_level']:g}%"
    synthetic = " (SYNTHETIC data)" if dataset["synthetic"] else ""
    figure.suptitle(
        f"{dataset['split']} split of {dataset['name']}{synthetic}; whiskers: {level} confidence intervals", fontsize=14
    )
    handles = [
        Patch(facecolor=styles[name][0], hatch=styles[name][1], edgecolor="0.25", label=name) for name in rows
    ]
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(rows), 4), fontsize=11)
    return figure


def plot_by_category(results: dict, path: Path) -> bool:
    """by_category.png (`category_figure`), written atomically; False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (`pip install fiber-benchmark[plots]`)", path.name)
        return False
    # Names, categories and the dataset's name are text: a '$' in them is a dollar, not the start of mathtext.
    with matplotlib.rc_context({"text.parse_math": False}), atomic_path(path) as temporary:
        category_figure(results).savefig(temporary, dpi=100)
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
    from fiberbench.leaderboard import model_index

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


@contextlib.contextmanager
def _cycle_collection_paused():
    """Python's cycle collector off for the block: scoring builds millions of small lists and dicts (rows,
    answers, scores) and no reference cycle, and the collector scanned them again and again as they grew,
    a third of the time for 100,000 blanks."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            # What is still alive sits in the youngest generation: move it to the oldest without a scan
            # (freeze, then unfreeze), or the first collection would scan it all (2 s at 100,000 blanks).
            gc.freeze()
            gc.enable()
            gc.unfreeze()


def run(args: argparse.Namespace) -> int:
    names, output, inputs = check_flags(args)
    with contextlib.ExitStack() as stack:
        if output is not None:
            stack.enter_context(output.open(inputs))
        stack.enter_context(_cycle_collection_paused())
        return score_and_write(args, names, output)


def score_and_write(args: argparse.Namespace, names: list[str], output: Output | None) -> int:
    """Score every predictions file as the system `names` says; print the leaderboard and write the results into
    `output` (if any)."""
    from fiberbench.data import load_fiber
    from fiberbench.data.provenance import is_synthetic

    for path in args.predictions:  # a missing file or an unknown format before the dataset is loaded
        if path.suffix.lower() not in FORMATS or not path.is_file():
            read_rows(path)
    described = "the bundled sample" if args.dataset_name is None else args.dataset_name
    splits = load_fiber(args.dataset_name, args.dataset_config_name)
    if args.with_baselines and args.split in splits and "train" not in splits:
        raise UsageError(f"--with_baselines needs a train split (for the most frequent answer); {described} has none")
    split = load_split(splits, args.split, described, with_human_agreement=args.with_baselines)
    train_labels = splits["train"].with_format("arrow")["label"].to_pylist() if args.with_baselines else None
    del splits  # its memory-mapped Arrow pages
    synthetic = is_synthetic(args.dataset_name)
    if synthetic:
        logger.warning("Scoring on SYNTHETIC data (%s): the numbers say nothing about FIBER", described)
    keys = split.index()
    # One file at a time: only one file's rows are held at once (100,000 rows are about 100 MB).
    systems = []
    for path, name in zip(args.predictions, names):
        rows = read_rows(path)
        systems.append(join_predictions(path, rows, name, split, keys))
        systems[-1].reading = recorded_reading(path, rows)

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
    leaderboard = leaderboard_markdown(results)
    print(leaderboard, flush=True)
    if results["readings_differ"]:
        logger.warning(READ_DIFFERENTLY)
    if args.model_index is not None:
        from fiberbench.leaderboard import model_index

        model_index.write(args.model_index, results)
        logger.info("Wrote the model-index of %s into %s", names[0], args.model_index)
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
