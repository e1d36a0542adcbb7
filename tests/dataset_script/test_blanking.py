"""`fiberbench blank`: the release's blanking procedure, its inputs and outputs, and bad inputs (one row per case)."""

import json
import logging
import random
import re
from pathlib import Path

import datasets
import pytest

from fiberbench.cli import main
from fiberbench.json_records import read_json_records, write_json_records

from .conftest import PIPELINE, cases

DATA = Path(__file__).parent / "data"
VATEX_SAMPLE = DATA / "vatex_sample.json"
# Checked by hand against the small pipeline's noun chunks of each clip's first caption with one: 34 clips, 29
# blanked; dropped: 3 with no noun chunk in any caption, 2 with no (non-blank) caption.
EXPECTED_SEED_2 = json.loads((DATA / "vatex_sample_blanked_seed2.json").read_text())


def blank(*arguments) -> None:
    assert main(["blank", *map(str, arguments), "--spacy_model", PIPELINE]) == 0


def official_procedure(instances: list[dict], nlp, seed: int) -> list[dict]:
    """The release's procedure written plainly: parse every caption, global `random`, file order."""
    random.seed(seed)
    records = []
    for instance in instances:
        captions = [caption.strip() for caption in instance["enCap"] if caption.strip()]
        captions = [caption[0].upper() + caption[1:] for caption in captions]
        docs = [nlp(caption if caption.endswith(".") else caption + ".") for caption in captions]
        doc = next((doc for doc in docs if list(doc.noun_chunks)), None)
        if doc is not None:
            chunk = random.choice(list(doc.noun_chunks))
            video_id, start, end = instance["videoID"].rsplit("_", maxsplit=2)
            masked = doc.text[: chunk.start_char] + "_____" + doc.text[chunk.end_char :]
            records.append({"video_id": video_id, "video_start_time": int(start), "video_end_time": int(end),
                            "caption": doc.text, "masked_caption": masked, "label": chunk.text})
    return records


def test_seed_2_gives_the_hand_checked_records_and_counts_every_drop(tmp_path, caplog, nlp):
    with caplog.at_level(logging.INFO):
        blank(VATEX_SAMPLE, "--output_file", tmp_path / "blanked.json")
    expected = official_procedure(json.loads(VATEX_SAMPLE.read_text()), nlp, seed=2)
    assert json.loads((tmp_path / "blanked.json").read_text()) == EXPECTED_SEED_2 == expected
    for line in ["clips read: 34", "blanked: 29", "dropped: no noun chunk in any caption: 3", "dropped: no caption: 2"]:
        assert line in caplog.text
    assert {"__under_sc_", "trail_____x"} <= {record["video_id"] for record in EXPECTED_SEED_2}
    record = json.loads((tmp_path / "blanked.metadata.json").read_text())
    assert (record["written_by"], record["state"]) == ("fiberbench blank", "complete")


def test_another_seed_is_the_official_procedure_that_parsed_every_caption(tmp_path, nlp):
    blank(VATEX_SAMPLE, "--output_file", tmp_path / "blanked.json", "--seed", 7)
    expected = official_procedure(json.loads(VATEX_SAMPLE.read_text()), nlp, seed=7)
    assert json.loads((tmp_path / "blanked.json").read_text()) == expected


@pytest.mark.slow
def test_two_parsing_processes_give_the_same_bytes_as_one(tmp_path):
    blank(VATEX_SAMPLE, "--output_file", tmp_path / "one.json")
    blank(VATEX_SAMPLE, "--output_file", tmp_path / "two.json", "--num_proc", 2, "--batch_size", 4)
    assert (tmp_path / "two.json").read_bytes() == (tmp_path / "one.json").read_bytes()


def test_json_lines_and_a_dataset_folder_of_other_columns(tmp_path):
    write_json_records(tmp_path / "vatex.jsonl", json.loads(VATEX_SAMPLE.read_text()))
    blank(tmp_path / "vatex.jsonl", "--output_file", tmp_path / "lines.jsonl")
    assert list(read_json_records(tmp_path / "lines.jsonl")) == EXPECTED_SEED_2
    instances = json.loads(VATEX_SAMPLE.read_text())
    rows = [{"clip": instance["videoID"], "captions": instance["enCap"]} for instance in instances]
    datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "vatex"))
    blank(tmp_path / "vatex", "--output_file", tmp_path / "blanked.json", "--split", "validation",
          "--video_id_column", "clip", "--captions_column", "captions")
    assert json.loads((tmp_path / "blanked.json").read_text()) == EXPECTED_SEED_2


GOOD = {"videoID": "good_000000_000010", "enCap": ["A dog runs in the park.", "Someone walks a dog."]}
OTHER = {"videoID": "other_000005_000015", "enCap": ["A cat sleeps on a sofa."]}
# (case, record 1 of a file of three as raw JSON, what the line says)
BAD_RECORDS = [
    ("not utf8", b'{"videoID": "x_000000_000010", "enCap": ["A caf\xe9."]}', r"record 1: holds bytes that are not UTF-8"),
    ("not an object", b'"a string"', r"record 1: expected a JSON object, got str"),
    ("nested 100k deep", b"[" * 100_000 + b"]" * 100_000, r"record 1: nested too deeply to decode"),
    ("no video id", b'{"enCap": ["A dog."]}', r"record 1: field 'videoID' is missing"),
    ("video id without times", b'{"videoID": "abc", "enCap": ["A dog."]}', r"record 1: field 'videoID': expected"),
    ("video id with a bad time", b'{"videoID": "abc_x_000001", "enCap": ["A dog."]}', r"record 1: field 'videoID': expected"),
    ("video id a path", b'{"videoID": "../../etc/passwd_000000_000010", "enCap": ["A dog."]}',
     r"record 1: field 'videoID': '../../etc/passwd' is not a plain video id \(only A-Z, a-z, 0-9, '_' and '-'\)"),
    ("captions not a list", b'{"videoID": "x_000000_000010", "enCap": "A dog."}', r"record 1: field 'enCap' must be"),
    ("a clip that ends before it starts", b'{"videoID": "abc_000011_000001", "enCap": ["A dog."]}',
     r"record 1: field 'videoID': the clip 'abc_000011_000001' ends at 1 s, not after its start at 11 s"),
    ("a clip given twice", json.dumps(GOOD).encode(), r"record 1: the clip \('good', 0, 10\) is also record 0"),
    ("caption of 1 MB", json.dumps({"videoID": "x_000000_000010", "enCap": ["A dog " * 200_000]}).encode(),
     r"record 1: field 'enCap': caption 0 has 1,200,000 characters, more than the spaCy pipeline takes \(1,000,000\)"),
]


@pytest.mark.parametrize(("raw", "message"), cases(BAD_RECORDS))
def test_a_bad_record_is_one_line_or_skipped_and_counted(tmp_path, refused, caplog, raw, message):
    source = tmp_path / "vatex.json"
    source.write_bytes(b"[" + b",\n".join([json.dumps(GOOD).encode(), raw, json.dumps(OTHER).encode()]) + b"]")
    refused(tmp_path, 1, f"{re.escape(str(source))}: {message}", "blank", source, "--output_file",
            tmp_path / "blanked.json", "--spacy_model", PIPELINE)
    with caplog.at_level(logging.INFO):
        blank(source, "--output_file", tmp_path / "blanked.json", "--skip_invalid")
    assert "dropped: invalid record: 1" in caplog.text and len(json.loads((tmp_path / "blanked.json").read_text())) == 2


# (case, what to put in the folder "{d}" first, the arguments, exit status, what the line says)
BAD_FILES_AND_FLAGS = [
    ("missing file", None, ["{d}/missing.json"], 1, r"missing.json: No such file or directory"),
    ("empty file", lambda d: (d / "empty.json").write_bytes(b""), ["{d}/empty.json"], 1, r"empty.json: holds no records"),
    ("cut short", lambda d: (d / "cut.json").write_text('[{"videoID": "x_000000_000010", "enCap": ["A do'),
     ["{d}/cut.json"], 1, r"cut.json: record 0: invalid JSON"),
    ("a folder that is no dataset", lambda d: (d / "folder").mkdir(), ["{d}/folder"], 1,
     r"folder is neither a `Dataset` directory nor a `DatasetDict` directory"),
    ("a dataset without the split", lambda d: datasets.DatasetDict(
        {"validation": datasets.Dataset.from_list([GOOD])}).save_to_disk(str(d / "vatex")),
     ["{d}/vatex"], 1, r"vatex: no split 'train' \(splits: \['validation'\]\); pass --split"),
    ("a damaged saved dataset", lambda d: (datasets.Dataset.from_list([GOOD]).save_to_disk(str(d / "saved")),
                                           (d / "saved" / "state.json").write_text("{")),
     ["{d}/saved"], 1, r"saved: not a readable saved dataset \(\w+"),
    ("num_proc 0", None, ["{source}", "--num_proc", "0"], 2, r"--num_proc: must be at least 1, got 0"),
    ("output is the input", None, ["{source}", "--output_file", "{source}"], 2,
     r"--output_file .*vatex.json is an input of this command: it would be overwritten"),
    ("output .txt", None, ["{source}", "--output_file", "{d}/blanked.txt"], 2,
     r"--output_file .*blanked.txt: name a .json file \(a JSON array\) or a .jsonl file \(JSON Lines\)"),
    ("a mistyped spaCy pipeline", None, ["{source}", "--spacy_model", "nonexistent_model"], 1,
     r"spaCy pipeline 'nonexistent_model' cannot be loaded .*python -m spacy download nonexistent_model"),
]


@pytest.mark.parametrize(("prepare", "arguments", "status", "message"), cases(BAD_FILES_AND_FLAGS))
def test_a_bad_file_or_flag_is_one_line_and_writes_nothing(tmp_path, refused, prepare, arguments, status, message):
    (tmp_path / "vatex.json").write_text(json.dumps([GOOD]))
    if prepare is not None:
        prepare(tmp_path)
    arguments = [argument.format(d=tmp_path, source=tmp_path / "vatex.json") for argument in arguments]
    # The row's flags come last: argparse keeps the last value of a flag given twice.
    refused(tmp_path, status, message, "blank", "--output_file", tmp_path / "blanked.json", "--spacy_model", PIPELINE,
            *arguments)


def test_an_earlier_output_is_replaced_only_with_the_flag(tmp_path, cli_error):
    blank(VATEX_SAMPLE, "--output_file", tmp_path / "blanked.json", "--seed", 7)
    code, line = cli_error("blank", VATEX_SAMPLE, "--output_file", tmp_path / "blanked.json", "--spacy_model", PIPELINE)
    assert code == 2 and "pass --overwrite_output_file to replace it" in line
    blank(VATEX_SAMPLE, "--output_file", tmp_path / "blanked.json", "--overwrite_output_file")
    assert json.loads((tmp_path / "blanked.json").read_text()) == EXPECTED_SEED_2
