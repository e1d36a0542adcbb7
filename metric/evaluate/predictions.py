"""Predictions files and the split they are scored on: a file's rows read, checked and joined strictly to the blanks.

A predictions file (JSON Lines, a JSON array or CSV, bounded before it is parsed) has one row per blank, named by its
clip (`KEY_FIELDS`), with the answer in `prediction` and, optionally, ranked `candidates`, or `"missing": true` for a
blank not answered. A wrong row, a blank without a row, given twice or not in the split is a `DataError`.
"""

import csv
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fiberbench.data import load_fiber
from fiberbench.data.provenance import is_synthetic
from fiberbench.errors import DataError, UsageError
from fiberbench.json_records import nesting_depth, too_long_integer
from fiberbench.metric import references_from_example
from fiberbench.outputs import read_record
from fiberbench.records import KEY_FIELDS, ClipKey, whole_seconds

FORMATS = (".jsonl", ".json", ".csv")
MISSING_SHOWN = 5  # how many blanks without a prediction an error lists
# FIBER's 1,000 blanks make files of a few MB (lmms-eval's samples included), rows of a few kB, 2-5 levels of JSON.
MAX_FILE_BYTES, MAX_LINE_CHARS, MAX_DEPTH, MAX_COLUMNS = 64 * 2**20, 2**20, 64, 100


@dataclass
class Split:
    """The blanks being scored, in split order, and what scoring needs of the rest of the dataset."""

    name: str
    described: str  # "the test split of the bundled sample", for messages
    dataset: dict  # results.json's "dataset": name, config, split, num_blanks, synthetic
    keys: list[ClipKey]
    references: list[list[str]]  # each blank's label and annotators' answers (`references_from_example`)
    labels: list[str]
    additional_answers: list[list[list[str]]]
    categories: list[str] | None
    other_splits: dict[str, set[ClipKey]]  # the other splits' blanks: a file of another split says which it is
    train_labels: list[str] | None  # for the most frequent answer; None without a train split

    def __post_init__(self):
        self.index: dict[ClipKey, int] = {}
        for row, key in enumerate(self.keys):
            if (first := self.index.setdefault(key, row)) != row:
                raise DataError(f"{self.described} holds the clip {key} twice, in rows {first} and {row}: a blank "
                                "is known by its clip, so predictions cannot be joined to it (build-dataset refuses "
                                "such data)")


def load_split(dataset_name: str | None, config_name: str, split_name: str) -> Split:
    """Split `split_name` of config `config_name` of `dataset_name` (`load_fiber`'s; None: the bundled sample)."""
    splits = load_fiber(dataset_name, config_name)
    described = "the bundled sample" if dataset_name is None else dataset_name
    if split_name not in splits:
        raise UsageError(f"--split {split_name}: {described} has no such split (it has: {', '.join(splits)})")
    columns = [*KEY_FIELDS, "label", *({"additional_answers", "category"} & set(splits[split_name].column_names))]
    rows = splits[split_name].select_columns(columns).to_list()
    described = f"the {split_name} split of {described}"
    if not any(row.get("additional_answers") for row in rows):
        raise UsageError(f"--split {split_name}: {described} has no annotators' answers (additional_answers) to score "
                         "against; use validation or test")
    categories = [row.get("category") for row in rows]
    dataset = {"name": dataset_name or "the bundled sample", "config": config_name, "split": split_name,
               "num_blanks": len(rows), "synthetic": is_synthetic(dataset_name)}
    return Split(split_name, described, dataset, [tuple(row[field] for field in KEY_FIELDS) for row in rows],
                 [references_from_example(row) for row in rows], [row["label"] for row in rows],
                 [row["additional_answers"] or [] for row in rows],
                 categories if all(isinstance(category, str) for category in categories) else None,
                 {name: set(zip(*(other[field] for field in KEY_FIELDS))) for name, other in splits.items()
                  if name != split_name}, list(splits["train"]["label"]) if "train" in splits else None)


def read_rows(path: Path) -> list[tuple[str, object]]:
    """(where, row) of every row of a predictions file, as written: JSON Lines, a JSON array, or CSV."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"{path}: cannot tell its format from {suffix or 'no suffix'!r}: use .jsonl, .json or .csv")
    if path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
        raise DataError(f"{path}: {path.stat().st_size:,} bytes, more than a predictions file may hold "
                        f"({MAX_FILE_BYTES:,})")
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:  # utf-8-sig: a byte-order mark is not data
            if suffix == ".json":
                records = _json_value(file.read(), path)
                if not isinstance(records, list):
                    raise DataError(f"{path}: expected a JSON array of objects, got {type(records).__name__}")
                return [(f"record {index}", record) for index, record in enumerate(records)]
            lines = _bounded_lines(file, path)
            if suffix == ".csv":
                reader = csv.DictReader(lines)
                if len(reader.fieldnames or []) > MAX_COLUMNS:
                    raise DataError(f"{path}: the header has {len(reader.fieldnames):,} columns, more than "
                                    f"{MAX_COLUMNS} (a predictions file needs 4 to 6)")
                if repeated := [name for name, count in Counter(reader.fieldnames or []).items() if count > 1]:
                    raise DataError(f"{path}: the header names column {repeated[0]!r} twice (which one is meant?)")
                return [(f"line {reader.line_num}", row) for row in reader]
            numbered = [(f"line {number}", line) for number, line in enumerate(lines, 1) if line.strip()]
            return [(where, _json_value(line, path, where)) for where, line in numbered]
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read (more than about 1,000 levels)") from None
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    except csv.Error as error:
        raise DataError(f"{path}: not a readable CSV file ({error})") from error


def _bounded_lines(file, path: Path):
    """The file's lines, each refused before it is held whole when longer than `MAX_LINE_CHARS`."""
    for number, line in enumerate(iter(lambda: file.readline(MAX_LINE_CHARS + 1), ""), 1):
        if len(line) > MAX_LINE_CHARS:
            raise DataError(f"{path}: line {number} is longer than {MAX_LINE_CHARS:,} characters, the most a line of "
                            "a predictions file may hold")
        yield line


def _distinct_fields(pairs: list[tuple[str, object]]) -> dict:
    """json's object_pairs_hook: a field given twice is an error (json keeps the last silently)."""
    fields = dict(pairs)
    if len(fields) < len(pairs):
        repeated = next(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
        raise DataError(f"an object gives field {repeated!r} twice (which value is meant?)")
    return fields


def _json_value(text: str, path: Path, where: str | None = None) -> object:
    """One JSON value whose objects give each field once; a `DataError` names the file (and the line) otherwise."""
    try:
        if nesting_depth(text) > MAX_DEPTH:
            raise DataError(f"JSON nested more than {MAX_DEPTH} levels deep")
        return json.loads(text, object_pairs_hook=_distinct_fields)
    except json.JSONDecodeError as error:
        problem = f"invalid JSON ({error.msg})"
        where = where or f"line {error.lineno}"
    except DataError as error:  # a field given twice, or nested too deep
        problem = str(error)
    except ValueError:  # Python refusing an integer of more than 4,300 digits
        problem = too_long_integer()
    raise DataError(": ".join([str(path), *([where] if where else []), problem])) from None


@dataclass
class System:
    """A predictions file joined to the split: its answer (and ranked candidates) for every blank, in split order."""

    name: str
    file: str
    predictions: list[str]  # "" where the blank is missing
    candidates: list[list[str]] | None
    answered: list[bool] | None = None  # None: every blank
    reading: dict | None = None  # how the answers were read from replies, where the file records it


def read_system(path: Path, name: str, split: Split) -> System:
    """A predictions file read and joined to the split, with how its answers were read where it says."""
    rows = read_rows(path)
    return System(name, str(path), *join(path, rows, split), recorded_reading(path, rows))


def join(path: Path, rows: list, split: Split) -> tuple[list[str], list | None, list[bool] | None]:
    """(predictions, candidates or None, which blanks were answered or None for all) in split order, each row checked
    in turn: every blank exactly once, answered or `"missing": true`. Rows whose `split` names another split (train.py
    writes validation and test rows into one file) are skipped. An empty string is a valid (wrong) answer."""
    is_csv = path.suffix.lower() == ".csv"
    predictions, candidates, answered = [None] * len(split.keys), [None] * len(split.keys), [True] * len(split.keys)
    first_seen: dict[ClipKey, str] = {}
    for where, row in rows:
        if not isinstance(row, dict):
            raise DataError(f"{path}: {where}: expected an object, got {type(row).__name__}")
        if row.get("split") not in (None, "", split.name):
            continue
        key, missing = blank_key(row, f"{path}: {where}", is_csv)
        if key in first_seen:
            raise DataError(f"{path}: {where}: blank {key} is predicted twice (first on {first_seen[key]})")
        index = split.index.get(key)
        if index is None:
            found = [name for name, keys in split.other_splits.items() if key in keys]
            hint = f", but in its {found[0]} split: is the file for --split {found[0]}?" if found else ""
            raise DataError(f"{path}: {where}: blank {key} is not in {split.described}{hint}")
        first_seen[key], predictions[index], answered[index] = where, "" if missing else row["prediction"], not missing
        if not missing and row.get("candidates") not in (None, ""):
            candidates[index] = ranked_candidates(row["candidates"], f"{path}: {where}", is_csv)
    if without := [key for key, index in split.index.items() if predictions[index] is None]:
        shown = ", ".join(map(str, without[:MISSING_SHOWN])) + (", ..." if len(without) > MISSING_SHOWN else "")
        raise DataError(f"{path}: no prediction for {len(without)} of the {len(split.keys)} blanks of "
                        f"{split.described}: {shown}")
    with_candidates = sum(ranked is not None for ranked in candidates)
    if 0 < with_candidates < sum(answered):
        raise DataError(f"{path}: {with_candidates} of {sum(answered)} answered rows have 'candidates': give them in "
                        "every row or in none")
    candidates = [[] if ranked is None else ranked for ranked in candidates] if with_candidates else None
    return predictions, candidates, None if all(answered) else answered


def blank_key(row: dict, where: str, is_csv: bool = False) -> tuple[ClipKey, bool]:
    """The blank a row predicts, and whether it says the blank is missing (`"missing": true`); times may be text (CSV)
    but must be whole seconds (`whole_seconds`); a row not missing needs a string `prediction`."""
    missing = row.get("missing", False)
    if is_csv and isinstance(missing, str):
        missing = {"": False, "false": False, "true": True}.get(missing.strip().lower(), missing)
    if not isinstance(missing, bool):
        raise DataError(f"{where}: field 'missing' must be true or false, got {missing!r}")
    for field in (*KEY_FIELDS, *["prediction"] * (not missing)):
        if field not in row:
            raise DataError(f"{where}: field {field!r} is missing")
    for field in ("video_id", *["prediction"] * (not missing)):
        if not isinstance(row[field], str):
            raise DataError(f"{where}: field {field!r} must be a string, got {type(row[field]).__name__}")
    times = []
    for field in KEY_FIELDS[1:]:
        try:
            times.append(whole_seconds(row[field], text=True))
        except ValueError as error:
            raise DataError(f"{where}: field {field!r} {error}") from None
    return (row["video_id"], *times), missing


def ranked_candidates(value, where: str, is_csv: bool) -> list[str]:
    """A row's ranked candidates: a list of strings (in CSV, JSON-encoded)."""
    if is_csv:
        if nesting_depth(value) > MAX_DEPTH:
            raise DataError(f"{where}: field 'candidates' is JSON nested more than {MAX_DEPTH} levels deep")
        try:
            value = json.loads(value)
        except ValueError as error:
            raise DataError(f"{where}: field 'candidates' must be a JSON list of strings ({error})") from None
    if not isinstance(value, list) or not all(isinstance(candidate, str) for candidate in value):
        raise DataError(f"{where}: field 'candidates' must be a list of strings, got {value!r}")
    return value


def recorded_reading(path: Path, rows: list) -> dict | None:
    """How the answers of a predictions file were read from a model's replies, where it says: `settings.reader` of
    `fiberbench predict`'s record beside it, or the `reader` that every lmms-eval sample carries. None where nothing
    is recorded."""
    record = read_record(path, folder=False)
    if record is not None and record["written_by"] == "fiberbench predict":
        reader = (record.get("settings") or {}).get("reader")
        if reader is not None and not isinstance(reader, dict):
            raise DataError(f"{path}: its record's 'settings.reader' must be an object, got {type(reader).__name__}")
        return reader
    readers = [(where, row.get("reader")) for where, row in rows
               if isinstance(row, dict) and row.get("missing") is not True]
    first_where, first = readers[0] if readers else (None, None)
    for where, reader in readers:  # lmms-eval's samples each carry it: one file, one reading
        if reader != first:
            raise DataError(f"{path}: {where}: field 'reader' differs from {first_where}'s: one file, one reading")
    if first is not None and not isinstance(first, dict):
        raise DataError(f"{path}: {first_where}: field 'reader' must be an object, got {type(first).__name__}")
    return first
