"""Tests of `fiberbench agreement` on a hand-worked release-format file."""

import json
import re

import pytest

from fiberbench.cli import main

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
# more annotator; "the" normalizes to nothing, so its annotator is left out.
# Caption 1: first answers dog (EM 1, F1 1), puppy (1, 1), cat (0, 0); all answers add puppy (1, 1).
# Caption 2: first answers "red ball" (1, 1), "blue ball" vs {red ball} (0, F1 1/(1 + 2/2) = 0.5);
#            all answers add "ball" vs {red ball} (0, F1 1/(1 + 1/2) = 2/3).
EXPECTED = {
    "first_answers_per_caption_f1": 100 * (2 / 3 + 3 / 4) / 2,  # 70.83
    "first_answers_per_caption_f1_std": 100 * (3 / 4 - 2 / 3) / 2,  # 4.17
    "first_answers_per_caption_exact_match": 100 * (2 / 3 + 1 / 2) / 2,  # 58.33
    "first_answers_per_caption_exact_match_std": 100 * (2 / 3 - 1 / 2) / 2,  # 8.33
    "first_answers_per_answer_f1": 100 * 3.5 / 5,  # [1, 1, 0, 1, 0.5]
    "first_answers_per_answer_f1_std": 100 * 0.4,  # sqrt(3.25 / 5 - 0.7 ** 2)
    "first_answers_per_answer_exact_match": 100 * 3 / 5,  # [1, 1, 0, 1, 0]
    "first_answers_per_answer_exact_match_std": 100 * 0.24**0.5,
    "all_answers_per_caption_f1": 100 * (3 / 4 + (1 + 0.5 + 2 / 3) / 3) / 2,
    "all_answers_per_caption_exact_match": 100 * (3 / 4 + 1 / 3) / 2,
    "all_answers_per_answer_f1": 100 * (4 + 0.5 + 2 / 3) / 7,
    "all_answers_per_answer_exact_match": 100 * 4 / 7,
    "num_captions": 2,
    "num_first_answers": 5,
    "num_all_answers": 7,
    "num_annotators_left_out": 1,
}


def test_agreement_of_a_hand_worked_file(tmp_path, capsys):
    source, output = tmp_path / "val.json", tmp_path / "agreement.json"
    source.write_text(json.dumps(RECORDS))
    assert main(["agreement", str(source), "--output_file", str(output)]) == 0
    results = json.loads(output.read_text())
    assert {key: results[key] for key in EXPECTED} == pytest.approx(EXPECTED)
    table = capsys.readouterr().out
    assert "| first | per caption | 70.8 (± 4.2) | 58.3 (± 8.3) | 82.6 (± 15.7) | 75.3 (± 19.7) |" in table
    assert "2 captions, 5 first answers, 7 all answers, 1 annotators left out" in table


def test_a_record_without_answers_is_named(tmp_path, cli_error):
    source = tmp_path / "val.json"
    without_answers = {key: value for key, value in RECORDS[1].items() if key != "additional_answers"}
    source.write_text(json.dumps([RECORDS[0], without_answers]))
    status, line = cli_error("agreement", source)
    assert status == 1 and re.search(r"val.json: record 1: field 'additional_answers': missing or empty", line)
