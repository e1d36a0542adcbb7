"""The record schema (fiberbench.records) and JSON records files (fiberbench.json_records): each error names the file,
the record and the field; a bad record of a file takes its place, and the records after it are read on."""

import json
import re

import numpy as np
import pytest

from fiberbench.errors import DataError
from fiberbench.json_records import JsonRecordError, read_json_records, read_json_values, write_json_records
from fiberbench.records import InvalidRecordError, load_video_features
from fiberbench.records import validate_record, whole_seconds

RECORD = {
    "video_id": "a-B_c1234XY",
    "video_start_time": 12,
    "video_end_time": 22,
    "caption": "A man plays a guitar.",
    "masked_caption": "A man plays _____.",
    "label": "a guitar",
    "additional_answers": [["a guitar", "an instrument"], ["a banjo"]],
}
TIMES = "must be a whole number of seconds from 0 to 2,147,483,647, got"
# (changes to RECORD, the field named, what the line says)
BAD_RECORDS = [
    ({"masked_caption": "A man plays a guitar."}, "masked_caption", "exactly one blank '_____', found none"),
    ({"masked_caption": "_____ plays _____."}, "masked_caption", "exactly one blank"),
    ({"masked_caption": "A man plays ______."}, "masked_caption", "found ['______']"),
    ({"masked_caption": 7}, "masked_caption", "expected str, got int"),
    ({"caption": "A man plays a banjo."}, "caption", "does not give the caption"),
    ({"caption": None, "label": ""}, "label", "empty"),
    ({"caption": None, "label": "The"}, "label", "'The' normalizes to nothing"),
    ({"video_start_time": 1.5}, "video_start_time", f"{TIMES} 1.5"),
    ({"video_end_time": "22"}, "video_end_time", f"{TIMES} '22'"),
    ({"video_start_time": True}, "video_start_time", f"{TIMES} True"),
    ({"video_start_time": -1}, "video_start_time", f"{TIMES} -1"),
    ({"video_end_time": 12}, "video_end_time", "must be greater than video_start_time (12 <= 12)"),
    ({"video_end_time": 2**31}, "video_end_time", f"{TIMES} 2147483648"),
    ({"video_start_time": 10**4000}, "video_start_time", "got 100000000000000000...0000000000000000000"),
    ({"video_id": "../../etc/x"}, "video_id", "is not a plain video id"),
    ({"video_id": "abc\\def"}, "video_id", "is not a plain video id"),
    ({"video_id": "abc def"}, "video_id", "is not a plain video id"),
    ({"video_id": ""}, "video_id", "is not a plain video id"),
    ({"video_id": 12345}, "video_id", "expected str, got int"),
    ({"additional_answers": "a guitar"}, "additional_answers", "expected list, got str"),
    ({"additional_answers": [[]]}, "additional_answers", "annotator 0: expected a non-empty list"),
    ({"additional_answers": [["a guitar"], "a banjo"]}, "additional_answers", "annotator 1: expected"),
    ({"additional_answers": [["a guitar", " "]]}, "additional_answers", "annotator 0, answer 1"),
    ({"label": ...}, "label", "missing"),  # ...: the field is left out
    ({"video_end_time": ...}, "video_end_time", "missing"),
]


@pytest.mark.parametrize(("changes", "field", "problem"), BAD_RECORDS)
def test_a_bad_record_names_file_index_and_field(changes, field, problem):
    record = {key: value for key, value in {**RECORD, **changes}.items() if value is not ...}
    with pytest.raises(InvalidRecordError) as raised:
        validate_record(record, file="val.json", index=41)
    assert str(raised.value).startswith(f"val.json: record 41: field '{field}': ") and problem in str(raised.value)
    assert (raised.value.file, raised.value.index, raised.value.field) == ("val.json", 41, field)


def test_a_valid_record_and_its_defaults():
    assert validate_record(RECORD, file="f", index=0) == RECORD
    bare = {key: value for key, value in RECORD.items() if key not in ("caption", "additional_answers")}
    assert validate_record(bare, file="f", index=0) == {**bare, "caption": None, "additional_answers": []}
    with pytest.raises(InvalidRecordError, match=r"^t.json: record 3: field '\(record\)': expected a JSON object"):
        validate_record(["a", "list"], file="t.json", index=3)
    assert whole_seconds(" 12 ", text=True) == 12
    with pytest.raises(ValueError, match="got '１２'"):
        whole_seconds("１２", text=True)


@pytest.mark.parametrize(
    ("array", "problem"),
    [
        (np.zeros((5, 1024), np.float32), "expected shape (1, T, 1024), got (5, 1024)"),
        (np.zeros((1, 0, 1024), np.float32), "got (1, 0, 1024)"),
        (np.zeros((1, 5, 1024), np.int64), "expected floats, got int64"),
        (np.full((1, 5, 1024), np.nan, np.float32), "contains NaN or infinite values"),
        (np.full((1, 5, 1024), 1e39, np.float64), "beyond float32's range"),
        (np.array([{"a": 1}], dtype=object), "Object arrays cannot be loaded"),
        (b"not a numpy file", "not a readable .npy array"),
        (b"", "not a readable .npy array (EOF"),
        (None, "feature file not found"),
    ],
)
def test_a_bad_feature_file_names_the_record(tmp_path, array, problem):
    path = tmp_path / "clip.npy"
    if isinstance(array, bytes):
        path.write_bytes(array)
    elif array is not None:
        np.save(path, array, allow_pickle=True)
    with pytest.raises(InvalidRecordError, match=r"^val.json: record 2: field 'video_features': ") as raised:
        load_video_features(path, file="val.json", index=2)
    assert problem in str(raised.value)


RECORDS = [{"index": index, "text": "é" * index * 700, "numbers": [index, 1.5, None]} for index in range(40)]
DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("name", ["records.json", "records.jsonl"])
def test_records_written_are_read_back_and_a_bad_record_takes_its_place(tmp_path, name):
    path = tmp_path / name
    assert write_json_records(path, iter(RECORDS)) == len(RECORDS)
    assert list(read_json_records(path)) == RECORDS and "é" in path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="not JSON compliant"):
        write_json_records(tmp_path / f"nan-{name}", [{"score": float("nan")}])
    good = [json.dumps(record).encode() for record in RECORDS[:2]]
    bad = [
        (b'{"text": "caf\xe9"}', "holds bytes that are not UTF-8 text (byte 0xe9)"),
        (DEEP, "nested too deeply to decode"),
        (b'{"a": ' + DEEP + b', "b": "]}\\\\"}', "nested too deeply to decode"),  # brackets inside a string after it
        (b'{"t": ' + b"7" * 5000 + b', "b": [1]}', "an integer too long to read (more than 4,300 digits)"),
        (b'["a list"]', "expected a JSON object, got list"),
    ]
    opening, separator, closing = (b"[", b",\n", b"]") if name.endswith(".json") else (b"", b"\n", b"\n")
    for raw, problem in bad:
        path.write_bytes(opening + separator.join([good[0], raw, good[1]]) + closing)
        values = list(read_json_values(path))
        assert values[0] == RECORDS[0] and values[2] == RECORDS[1], problem
        with pytest.raises(JsonRecordError, match=f"^{re.escape(f'{path}: record 1: {problem}')}"):
            list(read_json_records(path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"a": 1}, {"a": 2 "b": 3}]', r"record 1: invalid JSON at character 19"),
        ('[{"a": 1} {"a": 2}]', r"expected ',' or ']' after record 0"),
        ('[{"a": 1}, {"a": 2}', r"the JSON array is not closed"),
        ('[{"a": 1}] [', r"unexpected content after the closing"),
        ('{"a": 1}\n{"a": ', r"record 1: invalid JSON"),
        ('[{"t": 1}, ' + "7" * 5000 + "]", r"record 1: an integer too long to read"),
    ],
)
def test_a_file_that_cannot_be_read_on_names_the_record(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(DataError, match=f"{path}: {message}"):
        list(read_json_records(path))


@pytest.mark.parametrize(
    ("text", "records"), [("[]", []), ("  [ \n ]\n", []), ("", []), ("\ufeff{\"a\": 1}\r\n", [{"a": 1}])]
)
def test_empty_files_a_byte_order_mark_and_windows_line_ends(tmp_path, text, records):
    (tmp_path / "f.json").write_text(text, encoding="utf-8")
    assert list(read_json_records(tmp_path / "f.json")) == records
