"""The predictions file every command shares: what `fiberbench predict` writes and `fiberbench evaluate` reads.

A predictions file has one row per blank, named by its clip (`KEY_FIELDS`, the same fields as the
dataset's), with the system's answer in `prediction` and, optionally, its ranked `candidates` (in
CSV, a JSON-encoded list), as JSON Lines, a JSON array or CSV (`FORMATS`). Here: reading the rows
(`read_rows`; `read_columns`, its fast path for JSON Lines), the checks of one row (`blank_key`, `ranked_candidates`), and how the answers were read
from a model's replies where the file records it (`recorded_reading`). Joining the rows to a split's
blanks is `fiberbench.metric.scoring.split.join_predictions`.
"""

import csv
import json
from pathlib import Path

from fiberbench.errors import DataError

# The fields that name a blank's clip, in the dataset and in every predictions file.
KEY_FIELDS = ("video_id", "video_start_time", "video_end_time")
FORMATS = (".jsonl", ".json", ".csv")

BlankKey = tuple[str, int, int]


def read_rows(path: Path) -> list[tuple[str, object]]:
    """(where, row) of every row of a predictions file, as written: JSON Lines, a JSON array, or CSV."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"{path}: cannot tell its format from {suffix or 'no suffix'!r}: use .jsonl, .json or .csv")
    from fiberbench.json_records import too_long_integer

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


# The columns `read_columns` gives, with the Arrow type each must have; `candidates` and `split` may be absent.
_COLUMN_TYPES = {"video_id": "string", "video_start_time": "int64", "video_end_time": "int64", "prediction": "string"}
_OPTIONAL_TYPES = {"candidates": "list<item: string>", "split": "string"}
# Deeper values are left to `read_rows`, which refuses JSON nested past Python's recursion limit.
_MAX_NESTING = 100


def read_columns(path: Path) -> dict[str, list] | None:
    """The columns of a JSON Lines file that scoring joins (`_COLUMN_TYPES`, and `candidates` and `split` where
    given), read with pyarrow (five times faster than `read_rows` at 100,000 rows), or None where that reading
    cannot be shown to give the values `read_rows` gives, with no row or field missing or of another type.

    pyarrow's parser accepts more than Python's json: several objects on one line or one object over
    several lines (hence: every line that is not blank is one object: it starts with "{" and ends with
    "}", a newline cannot sit inside a JSON string, so no object spans lines, and there are as many
    rows as such lines), and `Inf` or `-NaN` (hence: no floating-point column anywhere, which also
    leaves integers too long for Python to `read_rows`). A repeated field, bad JSON, a string that is
    not UTF-8 or a lone surrogate fail pyarrow too. On None the caller reads the file with `read_rows`,
    whose errors name the file, the line and the field.
    """
    if path.suffix.lower() != ".jsonl":
        return None
    import pyarrow as pa
    import pyarrow.compute
    import pyarrow.json

    try:
        data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # a byte-order mark is not data (utf-8-sig)
        data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if b"\r" in data:  # Python's reading also ends a line at a lone carriage return
        return None
    lines = [line.strip(b" \t") for line in data.split(b"\n")]
    lines = [line for line in lines if line]
    if not lines or not all(line.startswith(b"{") and line.endswith(b"}") for line in lines):
        return None
    try:
        table = pyarrow.json.read_json(pa.BufferReader(data))
    except pa.ArrowException:  # any file pyarrow cannot read so: read_rows reads it, or names what is wrong
        return None
    given = {name: kind for name, kind in _OPTIONAL_TYPES.items() if name in table.column_names}
    expected = {**_COLUMN_TYPES, **given}
    if (
        table.num_rows != len(lines)
        or "reader" in table.column_names  # `recorded_reading` reads it row by row
        or not all(_plain_type(field.type, _MAX_NESTING) for field in table.schema)
        or any(str(table.schema.field(name).type) != kind for name, kind in expected.items() if name in table.column_names)
        or not set(expected) <= set(table.column_names)
    ):
        return None
    columns = {name: table.column(name) for name in expected}
    if any(column.null_count for column in columns.values()) or (
        "candidates" in columns and pa.compute.list_flatten(columns["candidates"]).null_count
    ):
        return None  # a field missing from some rows, or given as null
    return {name: column.to_pylist() for name, column in columns.items()}


def _plain_type(kind, depth: int) -> bool:
    """Whether values of Arrow type `kind` hold only what Python's json reads the same (text, whole numbers of 64
    bits, booleans, nulls, lists and objects of them), nested at most `depth` deep."""
    import pyarrow as pa

    if pa.types.is_list(kind):
        return depth > 0 and _plain_type(kind.value_type, depth - 1)
    if pa.types.is_struct(kind):
        return depth > 0 and all(_plain_type(kind.field(index).type, depth - 1) for index in range(kind.num_fields))
    return pa.types.is_string(kind) or pa.types.is_int64(kind) or pa.types.is_boolean(kind) or pa.types.is_null(kind)


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


def blank_key(row: dict, path: Path, where: str) -> BlankKey:
    """The blank a row predicts; times may be text (CSV) but must be whole seconds (`whole_seconds`, the dataset's
    definition of a time)."""
    from fiberbench.records import whole_seconds

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


def ranked_candidates(value, path: Path, where: str, is_csv: bool) -> list[str]:
    """A row's ranked candidates: a list of strings (in CSV, JSON-encoded)."""
    if is_csv:
        try:
            value = _json_value(value)
        except (ValueError, DataError, RecursionError) as error:
            raise DataError(f"{path}: {where}: field 'candidates' must be a JSON list of strings ({error})") from None
    if not isinstance(value, list) or not all(isinstance(candidate, str) for candidate in value):
        raise DataError(f"{path}: {where}: field 'candidates' must be a list of strings, got {value!r}")
    return value



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


