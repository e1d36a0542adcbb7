"""`read_columns`, the fast path of reading a JSON Lines predictions file: it gives the columns `read_rows` gives, and
declines (None) every file pyarrow would read otherwise, so `read_system` joins the same `System` and refuses a bad
file with the same one-line error as `read_rows` and `join_predictions`.
"""

import json

import pytest

from fiberbench.errors import DataError
from fiberbench.predictions import KEY_FIELDS, read_columns, read_rows, recorded_reading
from fiberbench.metric.scoring.split import join_predictions, load_split, read_splits, read_system


@pytest.fixture(scope="module")
def split():
    return load_split(read_splits(None, "text"), "test", "the bundled sample")


@pytest.fixture(scope="module")
def rows(split):
    """A valid row per blank of the sample's test split, with three ranked candidates."""
    return [
        dict(zip(KEY_FIELDS, key)) | {"prediction": f"answer {index}", "candidates": [f"answer {index}", "a", "b"]}
        for index, key in enumerate(split.keys)
    ]


def lines(rows) -> list[str]:
    return [json.dumps(row) for row in rows]


def jsonl(texts: list[str]) -> bytes:
    return "".join(text + "\n" for text in texts).encode()


def with_first(rows, fields: str) -> bytes:
    """The valid rows, the first with more fields given as JSON text (`fields`: ', "name": value')."""
    return jsonl([lines(rows)[0][:-1] + fields + "}", *lines(rows)[1:]])


def without(rows, field: str) -> list[dict]:
    return [{name: value for name, value in row.items() if name != field} for row in rows]


def first_as(rows, **fields) -> bytes:
    """The valid rows, the first with `fields` changed (a field set to `...` is left out)."""
    first = {name: value for name, value in (rows[0] | fields).items() if value is not ...}
    return jsonl(lines([first, *rows[1:]]))


def other_split(rows):
    return lines([row | {"split": "test"} for row in rows] + [rows[0] | {"split": "validation"}])


# name -> the file's bytes given the valid rows; these read_columns reads (the last four the join refuses).
READ = {
    "plain": lambda rows: jsonl(lines(rows)),
    "no candidates": lambda rows: jsonl(lines(without(rows, "candidates"))),
    "a byte-order mark, blank lines, spaces": lambda rows: (
        b"\xef\xbb\xbf\n  \n" + jsonl([f" \t{text} " for text in lines(rows)])
    ),
    "rows of another split": lambda rows: jsonl(other_split(rows)),
    "other fields, nested": lambda rows: jsonl(lines([row | {"meta": {"beams": [1, 2], "ok": True}} for row in rows])),
    "a blank predicted twice": lambda rows: jsonl(lines([*rows, rows[0]])),
    "an unknown blank": lambda rows: first_as(rows, video_id="nope"),
    "a blank missing": lambda rows: jsonl(lines(rows[1:])),
    "a date as video id (text to pyarrow too)": lambda rows: first_as(rows, video_id="2020-01-01"),
}
# name -> the file's bytes given the valid rows; these it declines, some of them valid, most of them not.
DECLINED = {
    "two objects on a line": lambda rows: jsonl([lines(rows)[0] + " " + lines(rows)[1], *lines(rows)[2:]]),
    "an object over two lines": lambda rows: jsonl([lines(rows)[0].replace(", ", ",\n", 1), *lines(rows)[1:]]),
    "Inf": lambda rows: with_first(rows, ', "score": Inf'),
    "-NaN": lambda rows: with_first(rows, ', "score": -NaN'),
    "an integer too long for Python": lambda rows: with_first(rows, ', "n": ' + "9" * 5000),
    "a field given twice": lambda rows: with_first(rows, ', "prediction": "x"'),
    "a nested field given twice": lambda rows: with_first(rows, ', "m": {"a": 1, "a": 2}'),
    "nested too deeply": lambda rows: with_first(rows, ', "m": ' + "[" * 2000 + "]" * 2000),
    "a time as text": lambda rows: first_as(rows, video_start_time="1"),
    "a float time": lambda rows: first_as(rows, video_end_time=20.0),
    "a bool time": lambda rows: first_as(rows, video_end_time=True),
    "a prediction missing": lambda rows: first_as(rows, prediction=...),
    "a null prediction": lambda rows: first_as(rows, prediction=None),
    "a null candidate": lambda rows: first_as(rows, candidates=["a", None]),
    "candidates in some rows": lambda rows: first_as(rows, candidates=...),
    "a row not an object": lambda rows: jsonl(["[1, 2]", *lines(rows)]),
    "not JSON": lambda rows: jsonl(["{nope}", *lines(rows)]),
    "not UTF-8": lambda rows: jsonl(lines(rows)).replace(b"answer 1", b"answer \xff", 1),
    "a lone surrogate": lambda rows: jsonl(lines(rows)).replace(b"answer 0", b"\\ud800", 1),
    "carriage returns": lambda rows: jsonl(lines(rows)).replace(b"\n", b"\r\n"),
    "readers in the rows": lambda rows: jsonl(lines([row | {"reader": {"format": "paper"}} for row in rows])),
    "empty": lambda rows: b"",
}


def by_read_rows(path, split):
    """The system, or the error's line, as `read_rows` and `join_predictions` give it."""
    try:
        rows = read_rows(path)
        system = join_predictions(path, rows, "s", split, split.index())
        system.reading = recorded_reading(path, rows)
        return system
    except DataError as error:
        return str(error)


def by_read_system(path, split):
    try:
        return read_system(path, "s", split, split.index())
    except DataError as error:
        return str(error)


@pytest.mark.parametrize("case", READ)
def test_the_fast_path_reads_the_columns_read_rows_reads(tmp_path, split, rows, case):
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(READ[case](rows))
    columns = read_columns(path)
    assert columns is not None
    records = [row for _, row in read_rows(path)]
    assert columns == {field: [record[field] for record in records] for field in columns}
    assert set(columns) == {*KEY_FIELDS, "prediction", *({"candidates", "split"} & set(records[0]))}
    assert by_read_system(path, split) == by_read_rows(path, split)


@pytest.mark.parametrize("case", DECLINED)
def test_what_the_fast_path_declines_is_read_and_refused_as_before(tmp_path, split, rows, case):
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(DECLINED[case](rows))
    assert read_columns(path) is None
    assert by_read_system(path, split) == by_read_rows(path, split)
