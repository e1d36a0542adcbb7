"""Tests of `fiberbench agreement` on a hand-worked release-format file, and on crowd answers with annotator ids."""

import csv
import json
import re
from pathlib import Path

import pytest

from fiberbench.cli import main

from .conftest import snapshot

RECORDS = [
    {
        "video_id": "v1",
        "video_start_time": 0,
        "video_end_time": 10,
        "caption": "A dog runs.",
        "masked_caption": "_____ runs.",
        "label": "A dog",
        "additional_answers": [["dog", "puppy"], ["a puppy"], ["cat"]],
    },
    {
        "video_id": "v2",
        "video_start_time": 0,
        "video_end_time": 10,
        "caption": "A boy kicks the red ball.",
        "masked_caption": "A boy kicks _____.",
        "label": "the red ball",
        "additional_answers": [["red ball"], ["a blue ball", "ball"], ["the"]],
    },
]

# Worked by hand. Each answer is compared with the other annotators' answers, the label being one
# more annotator; "the" normalizes to nothing, so it is dropped and its annotator left out.
# Caption 1: first answers dog (EM 100, F1 100), puppy (100, 100), cat (0, 0); all answers add
#            puppy (100, 100) and the label "dog" vs {dog, puppy, puppy, cat} (100, 100).
# Caption 2: first answers "red ball" (100, 100), "blue ball" vs {red ball} (0, F1 2*1/(2+2) = 50);
#            all answers add "ball" vs {red ball} (0, 2*1/(1+2) = 66.7) and the label (100, 100).
EM_BY_ANSWER = [100, 100, 100, 0, 100, 100, 0, 0, 100]
F1_BY_ANSWER = [100, 100, 100, 0, 100, 100, 50, 200 / 3, 100]
EXPECTED = {
    "first_answers_per_caption_f1": (2 / 3 + 3 / 4) / 2 * 100,  # 70.83
    "first_answers_per_caption_f1_std": (3 / 4 - 2 / 3) / 2 * 100,  # 4.17
    "first_answers_per_caption_exact_match": (2 / 3 + 1 / 2) / 2 * 100,  # 58.33
    "first_answers_per_caption_exact_match_std": (2 / 3 - 1 / 2) / 2 * 100,  # 8.33
    "all_answers_per_answer_f1": sum(F1_BY_ANSWER) / 9,  # 79.63
    "all_answers_per_answer_exact_match": 600 / 9,
    "all_answers_per_answer_exact_match_std_across_answers": 100 * (6 / 9 * 3 / 9) ** 0.5,
    "num_captions": 2,
    "num_first_answers": 5,
    "num_answers": 9,
    "num_annotators_left_out": 1,
    "num_empty_answers_dropped": 1,
    "num_repeated_answers_dropped": 0,
}


def mean(values):
    return sum(values) / len(values)


def std(values):
    return (sum((value - mean(values)) ** 2 for value in values) / len(values)) ** 0.5


def write_records(path, records):
    path.write_text(json.dumps(records))
    return path


def test_agreement_of_a_hand_worked_file(tmp_path, capsys):
    source, output = write_records(tmp_path / "val.json", RECORDS), tmp_path / "agreement.json"
    assert main(["agreement", str(source), "--output_file", str(output)]) == 0
    results = json.loads(output.read_text())
    assert {key: results[key] for key in EXPECTED} == pytest.approx(EXPECTED)
    assert "all_answers_per_answer_f1_std_across_annotators" not in results
    table = capsys.readouterr().out
    assert "| first answers, per caption | 70.8 (± 4.2) | 58.3 (± 8.3) | 82.6 (± 15.7) | 75.3 (± 19.7) |" in table
    assert "| all answers, per answer | 79.6 (± " in table
    assert "2 captions, 5 first answers, 9 answers, 1 annotators left out, 1 empty answers dropped" in table
    assert "the per-answer deviation is across answers: this file has no annotator ids" in table


def write_answers_csv(path, rows):
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["video_id", "video_start_time", "video_end_time", "annotator_id", "answer_1", "answer_2"])
        writer.writerows(rows)
    return path


# The answers of RECORDS by annotator id: w1 and w2 answer both clips; w3 only v1, w4 only v2 ("the": left out).
CSV_ROWS = [
    ["v1", 0, 10, "w1", "dog", "puppy"],
    ["v1", 0, 10, "w2", "a puppy", ""],
    ["v1", 0, 10, "w3", "cat", ""],
    ["v2", 0, 10, "w1", "red ball", ""],
    ["v2", 0, 10, "w2", "a blue ball", "ball"],
    ["v2", 0, 10, "w4", "the", ""],
    ["v9", 0, 10, "w1", "a clip that is not in the file", ""],
]


def test_agreement_of_crowd_answers_with_annotator_ids(tmp_path, capsys):
    records = [{key: value for key, value in record.items() if key != "additional_answers"} for record in RECORDS]
    source = write_records(tmp_path / "val.json", records)
    answers = write_answers_csv(tmp_path / "answers.csv", CSV_ROWS)
    output = tmp_path / "agreement.json"
    assert main(["agreement", str(source), "--answers_files", str(answers), "--output_file", str(output)]) == 0
    results = json.loads(output.read_text())
    assert {key: results[key] for key in EXPECTED} == pytest.approx(EXPECTED)  # the same answers as RECORDS
    # Each annotator's mean over all their answers (EM_BY_ANSWER / F1_BY_ANSWER, by annotator), the labels as one.
    em_by_annotator = {"w1": [100, 100, 100], "w2": [100, 0, 0], "w3": [0], "labels": [100, 100]}
    f1_by_annotator = {"w1": [100, 100, 100], "w2": [100, 50, 200 / 3], "w3": [0], "labels": [100, 100]}
    for metric, by_annotator in (("exact_match", em_by_annotator), ("f1", f1_by_annotator)):
        expected = std([mean(scores) for scores in by_annotator.values()])
        assert results[f"all_answers_per_answer_{metric}_std_across_annotators"] == pytest.approx(expected)
    assert results["all_answers_per_answer_exact_match_std_across_annotators"] == pytest.approx(43.30127)
    assert results["num_annotators"] == 4
    table = capsys.readouterr().out
    assert "| all answers, per answer | 79.6 (± 40.9) | 66.7 (± 43.3) | 70.0 (± 11.9) | 58.1 (± 16.3) |" in table
    assert "across annotators (each annotator's mean), as in the paper" in table


def test_a_clip_an_answer_says_is_an_unavailable_video_is_left_out(tmp_path):
    records = [{key: value for key, value in record.items() if key != "additional_answers"} for record in RECORDS]
    records.append({**records[0], "video_id": "v3"})
    rows = [*CSV_ROWS, ["v3", 0, 10, "w1", "dog", ""], ["v3", 0, 10, "w2", "Unavailable video", ""]]
    source = write_records(tmp_path / "val.json", records)
    output = tmp_path / "agreement.json"
    answers = write_answers_csv(tmp_path / "answers.csv", rows)
    assert main(["agreement", str(source), "--answers_files", str(answers), "--output_file", str(output)]) == 0
    results = json.loads(output.read_text())
    assert {key: results[key] for key in EXPECTED} == pytest.approx(EXPECTED)  # as if v3 had no answers


TRAIN_RECORD = {key: value for key, value in RECORDS[0].items() if key != "additional_answers"}
HEADER = b"video_id,video_start_time,video_end_time,annotator_id,answer_1\n"
GOOD = json.dumps(RECORDS).encode()
# (case, the file's bytes ("folder", or None: absent), the answers CSV's bytes (or None), the output, status, the line)
BAD_INPUTS = [
    ("no file", None, None, None, 1, r"val.json: No such file or directory"),
    ("a folder", "folder", None, None, 1, r"val.json: Is a directory"),
    ("bytes that are not UTF-8", GOOD[:30] + b"\xff" + GOOD[30:], None, None, 1,
     r"val.json: record 0: holds bytes that are not UTF-8 text \(byte 0xff\)"),
    ("not JSON", b"video_id,label\nv1,a dog\n", None, None, 1, r"val.json: record 0: invalid JSON"),
    ("cut short", GOOD[:-20], None, None, 1, r"val.json: record 1: invalid JSON"),
    ("a record that is not an object", b'["v1"]', None, None, 1, r"val.json: record 0: expected a JSON object, got str"),
    ("a record without a label", json.dumps([{k: v for k, v in RECORDS[0].items() if k != "label"}]).encode(), None,
     None, 1, r"val.json: record 0: field 'label': missing"),
    ("a split without answers (train)", json.dumps([TRAIN_RECORD]).encode(), None, None, 1,
     r"val.json: record 0: field 'additional_answers': missing or empty"),
    ("an annotator with no answers", json.dumps([{**RECORDS[0], "additional_answers": [["dog"], []]}]).encode(), None,
     None, 1, r"record 0: field 'additional_answers': annotator 1: expected a non-empty list"),
    ("no answers file", GOOD, "missing", None, 1, r"answers.csv: No such file or directory"),
    ("answers without answer columns", GOOD, HEADER.replace(b",answer_1", b""), None, 1,
     r"answers.csv: the fiber layout needs answer columns"),
    ("answers not UTF-8", GOOD, HEADER + b"v1,0,10,w1,caf\xe9\n", None, 1,
     r"answers.csv, line 2: byte 15 of the line \(0xe9\) is not UTF-8"),
    ("answers with times that are not seconds", GOOD, HEADER + b"v1,zero,10,w1,dog\n", None, 1,
     r"answers.csv, line 2, column 'video_start_time': must be a whole number of seconds"),
    ("answers of no clip of the file", GOOD, HEADER + b"v9,0,10,w1,dog\n", None, 1,
     r"No row of .*answers.csv answers a clip of the blanked file"),
    ("the output is the input", GOOD, None, "val.json", 2, r"--output_file .*val.json is an input"),
    ("the output is a folder", GOOD, None, "folder_out", 2, r"--output_file .*folder_out is a folder"),
]


@pytest.mark.parametrize(("content", "answers", "output", "status", "message"), [c[1:] for c in BAD_INPUTS],
                         ids=[c[0] for c in BAD_INPUTS])
def test_a_bad_input_is_one_line_and_writes_nothing(tmp_path, cli_error, content, answers, output, status, message):
    source, answers_file = tmp_path / "val.json", tmp_path / "answers.csv"
    if content == "folder":
        source.mkdir()
    elif content is not None:
        source.write_bytes(content)
    if isinstance(answers, bytes):
        answers_file.write_bytes(answers)
    if output == "folder_out":
        (tmp_path / output).mkdir()
    before = snapshot(tmp_path)
    flags = ["--output_file", tmp_path / (output or "agreement.json")] + (["--answers_files", answers_file] if answers else [])
    code, line = cli_error("agreement", source, *flags)
    assert code == status and re.search(message, line), line
    assert snapshot(tmp_path) == before


def test_answers_csv_with_a_byte_order_mark_and_windows_line_ends_are_read(tmp_path):
    source = write_records(tmp_path / "val.json", RECORDS)
    answers = tmp_path / "answers.csv"
    lines = ["video_id,video_start_time,video_end_time,annotator_id,answer_1,answer_2"]
    lines += [",".join(map(str, row)) for row in CSV_ROWS]
    answers.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    output = tmp_path / "agreement.json"
    assert main(["agreement", str(source), "--answers_files", str(answers), "--output_file", str(output)]) == 0
    assert json.loads(output.read_text())["num_annotators"] == 4


@pytest.mark.parametrize("copied", [False, True], ids=["the sample's file", "a copy of it"])
def test_the_bundled_samples_file_is_said_to_be_synthetic(tmp_path, capsys, caplog, copied):
    """As every other command says of the sample: the table, the log and the numbers written."""
    import logging
    import shutil

    from fiberbench.data import SAMPLE_DIR

    path = SAMPLE_DIR / "val.json"
    if copied:
        path = Path(shutil.copyfile(path, tmp_path / "val.json"))
    output = tmp_path / "agreement.json"
    with caplog.at_level(logging.WARNING):
        assert main(["agreement", str(path), "--output_file", str(output)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("**SYNTHETIC data** (the bundled sample's val.json, or a copy): the numbers say nothing")
    assert "SYNTHETIC" in caplog.text and json.loads(output.read_text())["synthetic"] is True


def test_a_file_that_is_not_the_samples_is_not_said_to_be_synthetic(tmp_path, capsys):
    from fiberbench.data import SAMPLE_DIR

    records = json.loads((SAMPLE_DIR / "val.json").read_text())[:20]
    path = tmp_path / "val.json"
    path.write_text(json.dumps(records))
    output = tmp_path / "agreement.json"
    assert main(["agreement", str(path), "--output_file", str(output)]) == 0
    assert "SYNTHETIC" not in capsys.readouterr().out and json.loads(output.read_text())["synthetic"] is False
