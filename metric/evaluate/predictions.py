"""Predictions files and the split they are scored on: a file's rows read, checked and joined strictly to the blanks.

A predictions file has one row per blank, named by its clip (`KEY_FIELDS`), with the answer in `prediction` and,
optionally, ranked `candidates` (in CSV, a JSON-encoded list), as JSON Lines, a JSON array or CSV. A row that is
wrong, a blank missing, given twice or not in the split is a `DataError` naming the file, the line and the field.
"""

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from fiberbench.data import load_fiber
from fiberbench.data.provenance import is_synthetic
from fiberbench.errors import DataError, UsageError
from fiberbench.json_records import too_long_integer
from fiberbench.metric import references_from_example
from fiberbench.outputs import read_record
from fiberbench.records import KEY_FIELDS, ClipKey, whole_seconds

FORMATS = (".jsonl", ".json", ".csv")
MISSING_SHOWN = 5  # how many blanks without a prediction an error lists


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
            first = self.index.setdefault(key, row)
            if first != row:
                raise DataError(
                    f"{self.described} holds the clip {key} twice, in rows {first} and {row}: a blank is known by "
                    "its clip, so predictions cannot be joined to it (build-dataset refuses such data)"
                )


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
        raise UsageError(
            f"--split {split_name}: {described} has no annotators' answers (additional_answers) to score against; "
            "use validation or test"
        )
    categories = [row.get("category") for row in rows]
    dataset = {"name": dataset_name or "the bundled sample", "config": config_name, "split": split_name,
               "num_blanks": len(rows), "synthetic": is_synthetic(dataset_name)}
    return Split(
        split_name,
        described,
        dataset,
        [tuple(row[field] for field in KEY_FIELDS) for row in rows],
        [references_from_example(row) for row in rows],
        [row["label"] for row in rows],
        [row["additional_answers"] or [] for row in rows],
        categories if all(isinstance(category, str) for category in categories) else None,
        {name: set(zip(*(other[field] for field in KEY_FIELDS)))
         for name, other in splits.items() if name != split_name},
        list(splits["train"]["label"]) if "train" in splits else None,
    )


def read_rows(path: Path) -> list[tuple[str, object]]:
    """(where, row) of every row of a predictions file, as written: JSON Lines, a JSON array, or CSV."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
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
                records = _json_value(file.read(), path)
                if not isinstance(records, list):
                    raise DataError(f"{path}: expected a JSON array of objects, got {type(records).__name__}")
                return [(f"record {index}", record) for index, record in enumerate(records)]
            lines = [(f"line {number}", line) for number, line in enumerate(file, 1) if line.strip()]
            return [(where, _json_value(line, path, where)) for where, line in lines]
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to read (more than about 1,000 levels)") from None
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error
    except csv.Error as error:
        raise DataError(f"{path}: not a readable CSV file ({error})") from error


def _distinct_fields(pairs: list[tuple[str, object]]) -> dict:
    """json's object_pairs_hook: a field given twice is an error (json keeps the last silently)."""
    names = [name for name, _ in pairs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DataError(f"an object gives field {repeated[0]!r} twice (which value is meant?)")
    return dict(pairs)


def _json_value(text: str, path: Path, where: str | None = None) -> object:
    """One JSON value whose objects give each field once; a `DataError` names the file (and the line) otherwise."""
    try:
        return json.loads(text, object_pairs_hook=_distinct_fields)
    except json.JSONDecodeError as error:
        problem = f"invalid JSON ({error.msg})"
        where = where or f"line {error.lineno}"
    except DataError as error:  # a field given twice
        problem = str(error)
    except ValueError:  # Python refusing an integer of more than 4,300 digits
        problem = too_long_integer()
    raise DataError(": ".join([str(path), *([where] if where else []), problem])) from None


@dataclass
class System:
    """A predictions file joined to the split: its answer (and ranked candidates) for every blank, in split order."""

    name: str
    file: str
    predictions: list[str]
    candidates: list[list[str]] | None
    reading: dict | None = None  # how the answers were read from replies, where the file records it


def read_system(path: Path, name: str, split: Split) -> System:
    """A predictions file read and joined to the split, with how its answers were read where it says."""
    rows = read_rows(path)
    return System(name, str(path), *join(path, rows, split), recorded_reading(path, rows))


def join(path: Path, rows: list, split: Split) -> tuple[list[str], list | None]:
    """(predictions, candidates or None) in split order, each row checked in turn: every blank exactly once.

    Rows whose `split` field names another split (train.py writes validation and test rows into one predictions.jsonl)
    are skipped. An empty string is a valid (wrong) answer. A `DataError` names the first wrong row.
    """
    is_csv = path.suffix.lower() == ".csv"
    predictions, candidates = [None] * len(split.keys), [None] * len(split.keys)
    first_seen: dict[ClipKey, str] = {}
    for where, row in rows:
        if not isinstance(row, dict):
            raise DataError(f"{path}: {where}: expected an object, got {type(row).__name__}")
        if row.get("split") not in (None, "", split.name):
            continue
        key = blank_key(row, f"{path}: {where}")
        if key in first_seen:
            raise DataError(f"{path}: {where}: blank {key} is predicted twice (first on {first_seen[key]})")
        index = split.index.get(key)
        if index is None:
            found = [name for name, keys in split.other_splits.items() if key in keys]
            hint = f", but in its {found[0]} split: is the file for --split {found[0]}?" if found else ""
            raise DataError(f"{path}: {where}: blank {key} is not in {split.described}{hint}")
        if not isinstance(row["prediction"], str):
            got = type(row["prediction"]).__name__
            raise DataError(f"{path}: {where}: field 'prediction' must be a string, got {got}")
        first_seen[key] = where
        predictions[index] = row["prediction"]
        if row.get("candidates") not in (None, ""):
            candidates[index] = ranked_candidates(row["candidates"], f"{path}: {where}", is_csv)
    missing = [key for key, index in split.index.items() if predictions[index] is None]
    if missing:
        shown = ", ".join(map(str, missing[:MISSING_SHOWN])) + (", ..." if len(missing) > MISSING_SHOWN else "")
        counted = f"{len(missing)} of the {len(split.keys)} blanks of {split.described}"
        raise DataError(f"{path}: no prediction for {counted}: {shown}")
    with_candidates = sum(ranked is not None for ranked in candidates)
    if 0 < with_candidates < len(split.keys):
        raise DataError(f"{path}: {with_candidates} of {len(split.keys)} rows have 'candidates': give them in every "
                        "row or in none")
    return predictions, candidates if with_candidates else None


def blank_key(row: dict, where: str) -> ClipKey:
    """The blank a row predicts; times may be text (CSV) but must be whole seconds (`whole_seconds`)."""
    for field in (*KEY_FIELDS, "prediction"):
        if field not in row:
            raise DataError(f"{where}: field {field!r} is missing")
    if not isinstance(row["video_id"], str):
        raise DataError(f"{where}: field 'video_id' must be a string, got {type(row['video_id']).__name__}")
    times = []
    for field in KEY_FIELDS[1:]:
        try:
            times.append(whole_seconds(row[field], text=True))
        except ValueError as error:
            raise DataError(f"{where}: field {field!r} {error}") from None
    return row["video_id"], *times


def ranked_candidates(value, where: str, is_csv: bool) -> list[str]:
    """A row's ranked candidates: a list of strings (in CSV, JSON-encoded)."""
    if is_csv:
        try:
            value = json.loads(value, object_pairs_hook=_distinct_fields)
        except (ValueError, RecursionError) as error:
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
    readers = [(where, row.get("reader")) for where, row in rows if isinstance(row, dict)]
    first_where, first = readers[0] if readers else (None, None)
    for where, reader in readers:  # lmms-eval's samples each carry it: one file, one reading
        if reader != first:
            raise DataError(f"{path}: {where}: field 'reader' differs from {first_where}'s: one file, one reading")
    if first is not None and not isinstance(first, dict):
        raise DataError(f"{path}: {first_where}: field 'reader' must be an object, got {type(first).__name__}")
    return first
