"""Tests of the streaming JSON record reader and the atomic writer behind the data tools."""

import json

import pytest

from fiberbench.data import json_records
from fiberbench.data.json_records import read_json_records, write_json_records

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
    with pytest.raises(ValueError, match=f"{path}: .*({message})"):
        list(read_json_records(path))


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
