"""The blanks of a FIBER split being scored, and the predictions files joined to them, one system each.

`read_splits` reads the dataset's splits as Arrow tables (a built folder straight from its Parquet
files); `load_split` reads a split's keys, categories and correct answers (normalized once, for
every system) and, for the human row, the annotators' agreement; `read_system` reads a predictions
file and `join_predictions` joins its rows to the split strictly: a missing, repeated or unknown blank is an error
naming the file and the line. `fiberbench evaluate` and the leaderboard both score what these give.
"""

import logging
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter, methodcaller
from pathlib import Path

from fiberbench.errors import DataError, UsageError
from fiberbench.predictions import (
    KEY_FIELDS,
    BlankKey,
    blank_key,
    ranked_candidates,
    read_columns,
    read_rows,
    recorded_reading,
)

logger = logging.getLogger(__name__)

MISSING_SHOWN = 5  # how many blanks without a prediction an error lists
# The columns scoring reads; `category` and `additional_answers` may be missing.
SCORED_COLUMNS = (*KEY_FIELDS, "label", "additional_answers", "category")


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



def read_system(path: Path, name: str, split: Split, keys: dict[BlankKey, int]) -> System:
    """A predictions file read and joined to the split (`keys`: `Split.index()`), with how its answers were read.

    A JSON Lines file that pyarrow reads as `read_rows` would (`read_columns`) and in which nothing
    is wrong is joined from its columns; any other goes through `read_rows` and `join_predictions`,
    whose errors name the row. Both give the same `System`.
    """
    columns = read_columns(path)
    if columns is not None:
        kept = _rows_of_split(columns.pop("split", None), split.name)
        joined = _joined_at_once({field: _kept(column, kept) for field, column in columns.items()}, keys)
        if joined is not None:
            _log_skipped(path, len(columns["video_id"]) - len(joined[0]), split)
            return System(name, str(path), *joined, reading=recorded_reading(path, []))
    rows = read_rows(path)
    system = join_predictions(path, rows, name, split, keys)
    system.reading = recorded_reading(path, rows)
    return system


def join_predictions(path: Path, rows: list, name: str, split: Split, keys: dict[BlankKey, int]) -> System:
    """The rows of a predictions file joined to the split's blanks (`keys`: `Split.index()`): every blank exactly once.

    Rows whose `split` field names another split (train.py writes validation and test rows into
    one predictions.jsonl) are skipped and counted. An empty string is a valid (wrong) answer.
    A file in which nothing is wrong is joined in bulk (`_joined_at_once`); any other is joined row
    by row, which names the first row that is wrong and what is wrong with it.
    """
    records = [row for _, row in rows]
    if set(map(type, records)) <= {dict}:
        kept = _rows_of_split(list(map(methodcaller("get", "split"), records)), split.name)
        records = _kept(records, kept)
        _log_skipped(path, len(rows) - len(records), split)
        columns = None if path.suffix.lower() == ".csv" else _columns(records)  # CSV: text times, joined row by row
        joined = None if columns is None else _joined_at_once(columns, keys)
        if joined is not None:
            return System(name, str(path), *joined)
    return System(name, str(path), *_joined_row_by_row(path, rows, split, keys))


def _rows_of_split(splits: list | None, split_name: str) -> list[int] | None:
    """The rows whose `split` field (None where no row has one) is absent, empty or `split_name`; None for all."""
    if splits is None or set(splits) <= {None, "", split_name}:
        return None
    return [row for row, name_of_split in enumerate(splits) if name_of_split in (None, "", split_name)]


def _kept(column: list | None, rows: list[int] | None) -> list | None:
    return column if column is None or rows is None else [column[row] for row in rows]


def _log_skipped(path: Path, skipped: int, split: Split) -> None:
    if skipped:
        logger.info("%s: skipped %d rows of other splits than %s", path, skipped, split.name)


def _columns(records: list[dict]) -> dict[str, list] | None:
    """The fields `_joined_at_once` takes, column by column (`candidates` None where no row has it); None where a row
    lacks a key field or its prediction."""
    try:
        fields = list(map(itemgetter(*KEY_FIELDS, "prediction"), records))
    except KeyError:
        return None
    columns = dict(zip((*KEY_FIELDS, "prediction"), map(list, zip(*fields)))) if fields else {}
    candidates = list(map(methodcaller("get", "candidates"), records))
    return {**columns, "candidates": None if all(ranked in (None, "") for ranked in candidates) else candidates}


def _joined_at_once(columns: dict[str, list], keys: dict[BlankKey, int]) -> tuple[list[str], list | None] | None:
    """(predictions, candidates or None) in split order from a file's columns (`_columns`, `read_columns`; no
    `candidates` where absent), with every check of `_joined_row_by_row` made column by column; None where any
    fails (a missing field, a value of another type, a time out of range, a blank unknown, repeated or missing,
    candidates in some rows only)."""
    from fiberbench.records import MAX_TIME

    video_ids, starts, ends, predictions = (columns.get(field, ()) for field in (*KEY_FIELDS, "prediction"))
    if not (set(map(type, video_ids)) <= {str} and set(map(type, predictions)) <= {str}):
        return None
    if not set(map(type, starts)) | set(map(type, ends)) <= {int}:  # a bool is no int here
        return None
    if starts and not (0 <= min(min(starts), min(ends)) and max(max(starts), max(ends)) <= MAX_TIME):
        return None
    indices = list(map(keys.get, zip(video_ids, starts, ends)))
    if len(indices) != len(keys) or None in indices or len(set(indices)) != len(keys):
        return None
    order = sorted(range(len(indices)), key=indices.__getitem__)  # the rows in split order
    candidates = columns.get("candidates")
    if candidates is None:
        return [predictions[row] for row in order], None
    if not (set(map(type, candidates)) <= {list} and set(map(type, chain.from_iterable(candidates))) <= {str}):
        return None
    return [predictions[row] for row in order], [candidates[row] for row in order]


def _joined_row_by_row(path: Path, rows: list, split: Split, keys: dict[BlankKey, int]) -> tuple[list, list | None]:
    """(predictions, candidates or None) in split order, each row checked in turn: a `DataError` names the first wrong
    row (or the blanks left without a prediction)."""
    is_csv = path.suffix.lower() == ".csv"
    predictions, candidates = [None] * len(keys), [None] * len(keys)
    first_seen: dict[BlankKey, str] = {}
    for where, row in rows:
        if not isinstance(row, dict):
            raise DataError(f"{path}: {where}: expected an object, got {type(row).__name__}")
        if row.get("split") not in (None, "", split.name):
            continue
        key = blank_key(row, path, where)
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
            candidates[index] = ranked_candidates(row["candidates"], path, where, is_csv)
    missing = [key for key, index in keys.items() if predictions[index] is None]
    if missing:
        shown = ", ".join(map(str, missing[:MISSING_SHOWN])) + (", ..." if len(missing) > MISSING_SHOWN else "")
        counted = f"{len(missing)} of the {len(keys)} blanks of {split.described}"
        raise DataError(f"{path}: no prediction for {counted}: {shown}")
    with_candidates = sum(ranked is not None for ranked in candidates)
    if 0 < with_candidates < len(keys):
        problem = f"{with_candidates} of {len(keys)} rows have 'candidates'"
        raise DataError(f"{path}: {problem}: give them in every row or in none")
    return predictions, candidates if with_candidates else None


def read_splits(dataset_name: str | None, config_name: str) -> dict:
    """The splits of config `config_name` of `dataset_name` (as `load_fiber` takes it), as Arrow tables of at least
    `SCORED_COLUMNS`, in the dataset's order.

    A folder written by `fiberbench build-dataset` is read straight from its Parquet files
    (`built_folder_tables`): scoring needs only the tables, and importing `datasets` (and the pandas
    it imports) cost a cold `fiberbench evaluate` more than scoring 1,000 blanks. A Hub id, the
    bundled sample, and a folder that cannot be read so go through `load_fiber`, which says what is
    wrong with them.
    """
    if dataset_name is not None:
        tables = built_folder_tables(Path(dataset_name).expanduser(), config_name, f"--dataset_name {dataset_name}")
        if tables is not None:
            return tables
    from fiberbench.data import load_fiber

    splits = load_fiber(dataset_name, config_name)
    return {
        name: split.select_columns([column for column in SCORED_COLUMNS if column in split.column_names])
        .with_format("arrow")[:]
        for name, split in splits.items()
    }


def built_folder_tables(folder: Path, config_name: str, flag: str) -> dict | None:
    """The splits of config `config_name` of a folder built by `fiberbench build-dataset`, read from its Parquet files
    with pyarrow and checked as `load_fiber` checks them (nulls, video ids: a `DataError` naming the row).

    The rows are those `load_dataset` reads: each split's files as the card's `data_files` name them,
    in sorted order. None where that reading could differ from `load_dataset`'s or fail (no card, a
    config or split the card does not name, files missing or unreadable, columns not of the types a
    build writes, video features, row counts other than the card's): `load_fiber` then reads the
    folder, and names what is wrong.
    """
    from fiberbench.data.loading import REQUIRED_NON_NULL, check_tables

    try:
        tables = _read_built_folder(folder, config_name, set(SCORED_COLUMNS) | set(REQUIRED_NON_NULL))
    except Exception:  # noqa: BLE001 - whatever cannot be read so (a broken card, a damaged file): load_fiber names it
        return None
    if tables is None:
        return None
    check_tables(tables, flag)
    return tables


def _read_built_folder(folder: Path, config_name: str, wanted: set[str]) -> dict | None:
    """`built_folder_tables` without the checks: the columns in `wanted` of each split, or None (see there)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fiberbench.data.provenance import card_metadata

    # The Arrow types build-dataset writes the columns scoring reads with, and `masked_caption`'s (checked for nulls).
    built_types = {
        "video_id": pa.string(),
        "video_start_time": pa.int32(),
        "video_end_time": pa.int32(),
        "label": pa.string(),
        "additional_answers": pa.list_(pa.list_(pa.string())),
        "category": pa.string(),
        "masked_caption": pa.string(),
    }
    metadata = card_metadata(folder) if folder.is_dir() else {}
    configs = [entry for entry in metadata.get("configs") or [] if entry.get("config_name") == config_name]
    infos = metadata.get("dataset_info") or {}
    infos = [info for info in (infos if isinstance(infos, list) else [infos]) if info.get("config_name") == config_name]
    if not configs or not isinstance(configs[0].get("data_files"), list):
        return None
    num_examples = {entry["name"]: entry["num_examples"] for info in infos[:1] for entry in info.get("splits") or []}
    tables = {}
    for entry in configs[0]["data_files"]:
        if not isinstance(entry.get("path"), str):
            return None
        paths = sorted(str(path) for path in folder.glob(entry["path"]) if path.is_file())
        shards = [pq.ParquetFile(path) for path in paths]
        columns = [name for name in shards[0].schema_arrow.names if name in wanted] if shards else []
        if not shards or any(
            shard.schema_arrow.field(name).type != built_types.get(name) for shard in shards for name in columns
        ):
            return None  # video features (no type here) or columns of other types, which `load_dataset` would cast
        tables[entry["split"]] = pa.concat_tables(shard.read(columns, use_threads=False) for shard in shards)
        if num_examples.get(entry["split"], tables[entry["split"]].num_rows) != tables[entry["split"]].num_rows:
            return None
    return tables


def load_split(splits: dict, split_name: str, described: str, with_human_agreement: bool = False) -> Split:
    """The blanks of one split of `splits` (`read_splits`), which must have annotators' answers to score against.

    With `with_human_agreement`, the human row's columns are computed too, while the annotators'
    raw answers are at hand (they are then let go: 100,000 blanks' answers are about 300 MB).
    """
    if split_name not in splits:
        raise UsageError(f"--split {split_name}: {described} has no such split (it has: {', '.join(splits)})")
    table = splits[split_name]
    # Whole Arrow columns to Python at once: row by row (`to_list`) took 5 s for 100,000 blanks.
    columns = {name: table.column(name).to_pylist() for name in SCORED_COLUMNS if name in table.column_names}
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




def correct_answers(labels: list[str], additional_answers: list) -> tuple:
    """Blanks' correct answers as the metric takes them (`CorrectAnswers`, normalized once for every system): the
    label and every annotator's answers (`references_from_columns`), and the label alone."""
    from fiberbench.metric import CorrectAnswers, references_from_columns

    return CorrectAnswers(references_from_columns(labels, additional_answers)), CorrectAnswers([[label] for label in labels])


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


