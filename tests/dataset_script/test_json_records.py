"""Tests of the streaming JSON record reader and the atomic writer behind the data tools."""

import json
import re

import pytest

from fiberbench import json_records
from fiberbench.json_records import JsonRecordError, read_json_records, read_json_values, write_json_records
from fiberbench.errors import DataError

RECORDS = [{"index": index, "text": "é" * index * 700, "numbers": [index, 1.5, None]} for index in range(40)]


@pytest.mark.parametrize("name", ["records.json", "records.jsonl"])
def test_round_trip_through_a_small_buffer(tmp_path, monkeypatch, name):
    monkeypatch.setattr(json_records, "_CHUNK_CHARS", 1000)  # records up to 27x the buffer
    path = tmp_path / name
    assert write_json_records(path, iter(RECORDS)) == len(RECORDS)
    assert list(read_json_records(path)) == RECORDS
    if name.endswith(".json"):
        assert json.loads(path.read_text()) == RECORDS


@pytest.mark.parametrize("text", ["[]", "  [ \n ]\n", "", "\n\n"])
def test_empty_files(tmp_path, text):
    path = tmp_path / "empty.json"
    path.write_text(text)
    assert list(read_json_records(path)) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"a": 1}, {"a": 2 "b": 3}]', r"record 1: invalid JSON at character 19"),
        ('[{"a": 1}, 2]', r"record 1: expected a JSON object, got int"),
        ('[{"a": 1} {"a": 2}]', r"expected ',' or ']' after record 0"),
        ('[{"a": 1}, {"a": 2}', r"the JSON array is not closed"),
        ('[{"a": 1}] [', r"unexpected content after the closing"),
        ('{"a": 1}\n{"a": ', r"record 1: invalid JSON"),
    ],
)
def test_malformed_files_are_named_with_the_record(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(DataError, match=f"{path}: .*({message})"):
        list(read_json_records(path))


@pytest.mark.parametrize("name", ["records.json", "records.jsonl"])
def test_written_as_fiberbench_files_writes_json(tmp_path, name):
    """UTF-8 text as it is (not \\u escapes), and NaN refused: it is not JSON."""
    path = tmp_path / name
    write_json_records(path, [{"caption": "Un café à Zürich."}])
    assert "Un café à Zürich." in path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="not JSON compliant"):
        write_json_records(tmp_path / f"nan-{name}", [{"score": float("nan")}])
    assert [child.name for child in tmp_path.iterdir()] == [name]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")

    def records():
        yield {"a": 1}
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        write_json_records(path, records())
    assert path.read_text() == "old"
    assert [child.name for child in tmp_path.iterdir()] == ["out.json"]


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("name", ["records.json", "records.jsonl"])
@pytest.mark.parametrize(
    ("bad_record", "problem"),
    [
        (b'{"text": "caf\xe9"}', "holds bytes that are not UTF-8 text (byte 0xe9)"),
        (DEEP.encode(), "nested too deeply to decode"),
        # Brackets and an escaped backslash inside a string after the deep value do not end the record.
        (b'{"a": ' + DEEP.encode() + b', "b": "]}\\\\"}', "nested too deeply to decode"),
        # Python's int() refuses more than 4,300 digits, and so does its JSON decoder.
        (b'{"video_start_time": ' + b"7" * 5000 + b', "b": [1]}', "an integer too long to read (more than 4,300 digits)"),
    ],
)
def test_a_bad_record_takes_its_place_and_the_rest_is_read(tmp_path, monkeypatch, name, bad_record, problem):
    """The records after an undecodable one are read on (a reader that skips bad records can skip it)."""
    monkeypatch.setattr(json_records, "_CHUNK_CHARS", 1000)  # the deep record spans many buffer fills
    path = tmp_path / name
    good = [json.dumps(record).encode() for record in RECORDS[:3]]
    opening, separator, closing = (b"[", b",\n", b"]") if name.endswith(".json") else (b"", b"\n", b"\n")
    path.write_bytes(opening + separator.join([good[0], bad_record, good[1], good[2]]) + closing)
    values = list(read_json_values(path))
    assert len(values) == 4 and values[0] == RECORDS[0] and values[2:] == RECORDS[1:3]
    assert isinstance(values[1], JsonRecordError) and values[1].index == 1 and problem in values[1].problem
    with pytest.raises(JsonRecordError, match=f"^{re.escape(f'{path}: record 1: {problem}')}"):
        list(read_json_records(path))


def test_a_value_that_is_not_an_object_is_yielded_and_refused_by_read_json_records(tmp_path):
    path = tmp_path / "records.json"
    path.write_text('[{"a": 1}, ["a list"], {"a": 2}]')
    assert list(read_json_values(path)) == [{"a": 1}, ["a list"], {"a": 2}]
    with pytest.raises(JsonRecordError, match=r"record 1: expected a JSON object, got list"):
        list(read_json_records(path))


def test_a_byte_order_mark_and_windows_line_ends_are_accepted(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes("\ufeff".encode() + b'{"a": 1}\r\n{"a": 2}\r\n')
    assert list(read_json_records(path)) == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    "command",
    [
        ["agreement", "{d}/val.json"],
        ["stats", "{d}/val.json", "--output_dir", "{d}/stats"],
        ["hit-inputs", "{d}/val.json", "--output_file", "{d}/hits.csv"],
        ["answers", "--blanked_files", "{d}/val.json", "--answers_files", "{d}/answers.csv", "--output_dir", "{d}/out"],
    ],
    ids=lambda command: command[0],
)
def test_a_5000_digit_integer_is_one_line_naming_the_record(command, tmp_path, cli_error):
    record = {"video_id": "abc", "video_start_time": 7, "video_end_time": 20, "masked_caption": "A _____.", "label": "a"}
    text = json.dumps([record, record]).replace('"video_start_time": 7', '"video_start_time": ' + "7" * 5000, 1)
    (tmp_path / "val.json").write_text(text)
    (tmp_path / "answers.csv").write_text("video_id,video_start_time,video_end_time,annotator_id,answer_1\n")
    status, line = cli_error(*(argument.format(d=tmp_path) for argument in command))
    assert status == 1 and "val.json: record 0: an integer too long to read (more than 4,300 digits)" in line, line
