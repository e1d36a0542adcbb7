"""`fiberbench agreement` (Table 2) of a hand-worked release-format file, and of crowd answers with annotator ids."""

import json
import logging
import shutil
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR

from .conftest import blanked_record, cases, write_csv

RECORDS = [
    blanked_record("v1", "A dog runs.", "A dog", 0, 10) | {"additional_answers": [["dog", "puppy"], ["a puppy"], ["cat"]]},
    blanked_record("v2", "A boy kicks the red ball.", "the red ball", 0, 10)
    | {"additional_answers": [["red ball"], ["a blue ball", "ball"], ["the"]]},
]
# Worked by hand. Each answer is compared with the other annotators' answers, the label being one more annotator;
# "the" normalizes to nothing, so it is dropped and its annotator left out.
# Caption 1: first answers dog (EM 100, F1 100), puppy (100, 100), cat (0, 0); all answers add puppy (100, 100) and the
#            label "dog" vs {dog, puppy, puppy, cat} (100, 100).
# Caption 2: first answers "red ball" (100, 100), "blue ball" vs {red ball} (0, F1 2*1/(2+2) = 50); all answers add
#            "ball" vs {red ball} (0, 2*1/(1+2) = 66.7) and the label (100, 100).
EXPECTED = {
    "first_answers_per_caption_f1": (2 / 3 + 3 / 4) / 2 * 100,
    "first_answers_per_caption_f1_std": (3 / 4 - 2 / 3) / 2 * 100,
    "first_answers_per_caption_exact_match": (2 / 3 + 1 / 2) / 2 * 100,
    "first_answers_per_caption_exact_match_std": (2 / 3 - 1 / 2) / 2 * 100,
    "all_answers_per_answer_f1": (600 + 50 + 200 / 3) / 9,
    "all_answers_per_answer_exact_match": 600 / 9,
    "all_answers_per_answer_exact_match_std_across_answers": 100 * (6 / 9 * 3 / 9) ** 0.5,
    "num_captions": 2, "num_first_answers": 5, "num_answers": 9, "num_annotators_left_out": 1,
    "num_empty_answers_dropped": 1, "num_repeated_answers_dropped": 0,
}
# The answers of RECORDS by annotator id: w1 and w2 answer both clips; w3 only v1, w4 only v2 ("the": left out).
CSV_ROWS = [["v1", 0, 10, "w1", "dog", "puppy"], ["v1", 0, 10, "w2", "a puppy", ""], ["v1", 0, 10, "w3", "cat", ""],
            ["v2", 0, 10, "w1", "red ball", ""], ["v2", 0, 10, "w2", "a blue ball", "ball"], ["v2", 0, 10, "w4", "the", ""],
            ["v9", 0, 10, "w1", "a clip that is not in the file", ""]]


def write_answers_csv(path: Path, rows) -> Path:
    columns = ("video_id", "video_start_time", "video_end_time", "annotator_id", "answer_1", "answer_2")
    return write_csv(path, [dict(zip(columns, row)) for row in rows])


def agreement(tmp_path, records, *flags) -> dict:
    (tmp_path / "val.json").write_text(json.dumps(records))
    assert main(["agreement", str(tmp_path / "val.json"), "--output_file", str(tmp_path / "a.json"), *map(str, flags)]) == 0
    return json.loads((tmp_path / "a.json").read_text())


def test_agreement_of_a_hand_worked_file(tmp_path, capsys):
    results = agreement(tmp_path, RECORDS)
    assert {key: results[key] for key in EXPECTED} == pytest.approx(EXPECTED)
    table = capsys.readouterr().out
    assert "| first answers, per caption | 70.8 (± 4.2) | 58.3 (± 8.3) | 82.6 (± 15.7) | 75.3 (± 19.7) |" in table
    assert "2 captions, 5 first answers, 9 answers, 1 annotators left out, 1 empty answers dropped" in table
    assert "the per-answer deviation is across answers: this file has no annotator ids" in table


def test_agreement_of_crowd_answers_with_annotator_ids_leaves_unavailable_videos_out(tmp_path, capsys):
    records = [{key: value for key, value in record.items() if key != "additional_answers"} for record in RECORDS]
    rows = [*CSV_ROWS, ["v3", 0, 10, "w1", "dog", ""], ["v3", 0, 10, "w2", "Unavailable video", ""]]
    results = agreement(tmp_path, [*records, {**records[0], "video_id": "v3"}], "--answers_files",
                        write_answers_csv(tmp_path / "answers.csv", rows))
    assert {key: results[key] for key in EXPECTED} == pytest.approx(EXPECTED)  # the same answers as RECORDS
    # The deviation across annotators of each annotator's mean over all their answers (the labels as one annotator).
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    for metric, by_annotator in (("exact_match", [[100] * 3, [100, 0, 0], [0], [100, 100]]),
                                 ("f1", [[100] * 3, [100, 50, 200 / 3], [0], [100, 100]])):
        means = [mean(scores) for scores in by_annotator]
        std = mean([(value - mean(means)) ** 2 for value in means]) ** 0.5
        assert results[f"all_answers_per_answer_{metric}_std_across_annotators"] == pytest.approx(std)
    assert results["num_annotators"] == 4
    row = "| all answers, per answer | 79.6 (± 40.9) | 66.7 (± 43.3) | 70.0 (± 11.9) | 58.1 (± 16.3) |"
    assert row in capsys.readouterr().out


@pytest.mark.parametrize("copied", [False, True], ids=["the sample's file", "a copy of it"])
def test_the_bundled_samples_file_is_said_to_be_synthetic(tmp_path, capsys, caplog, copied):
    path = Path(shutil.copyfile(SAMPLE_DIR / "val.json", tmp_path / "val.json")) if copied else SAMPLE_DIR / "val.json"
    with caplog.at_level(logging.WARNING):
        assert main(["agreement", str(path), "--output_file", str(tmp_path / "a.json")]) == 0
    assert capsys.readouterr().out.startswith("**SYNTHETIC data** (the bundled sample's val.json, or a copy)")
    assert "SYNTHETIC" in caplog.text and json.loads((tmp_path / "a.json").read_text())["synthetic"] is True


# (case, the file's bytes (None: absent), the answers CSV's rows (or None), the output's name, exit status, the line)
BAD_INPUTS = [
    ("bytes that are not UTF-8", json.dumps(RECORDS).encode().replace(b"runs", b"r\xffns", 1), None, "a.json", 1,
     r"val.json: record 0: holds bytes that are not UTF-8 text \(byte 0xff\)"),
    ("a split without answers (train)", json.dumps([RECORDS[0] | {"additional_answers": []}]).encode(), None, "a.json",
     1, r"val.json: record 0: field 'additional_answers': missing or empty: agreement needs annotators' answers"),
    ("answers with times that are not seconds", json.dumps(RECORDS).encode(), [["v1", "zero", 10, "w1", "dog", ""]],
     "a.json", 1, r"answers.csv, line 2, column 'video_start_time': must be a whole number of seconds"),
    ("answers of no clip of the file", json.dumps(RECORDS).encode(), [["v9", 0, 10, "w1", "dog", ""]], "a.json", 1,
     r"No row of .*answers.csv answers a clip of the blanked file"),
    ("the output is the input", json.dumps(RECORDS).encode(), None, "val.json", 2, r"--output_file .*val.json is an input"),
]


@pytest.mark.parametrize(("content", "rows", "output", "status", "message"), cases(BAD_INPUTS))
def test_a_bad_input_is_one_line_and_writes_nothing(tmp_path, refused, content, rows, output, status, message):
    if content is not None:
        (tmp_path / "val.json").write_bytes(content)
    flags = ["--answers_files", write_answers_csv(tmp_path / "answers.csv", rows)] if rows else []
    refused(tmp_path, status, message, "agreement", tmp_path / "val.json", "--output_file", tmp_path / output, *flags)
