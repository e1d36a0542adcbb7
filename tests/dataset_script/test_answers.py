"""`fiberbench answers`: crowd answers, in the three CSV layouts, merged into the release format; bad inputs (one row
per case) are one line naming the file (line, column, record, field), and nothing is written or lost."""

import json
import logging

import pytest

from fiberbench.cli import main

from .conftest import PIPELINE, blanked_record, cases, write_csv

VAL = [
    blanked_record("vid_a_1", "A man is cutting a cake in the kitchen.", "A man", start=0, end=10),
    blanked_record("vid-b", "A man is cutting a cake in the kitchen.", "a cake", start=5, end=15),
]
TEST = [blanked_record("vid_c", "A woman walks her dog along the beach.", "the beach", start=20, end=30)]
# (clip, annotator, answers in order). Rows of one annotator for two clips, two rows of one annotator for one clip
# (merged), and a clip that is in no blanked file.
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
EXPECTED_VAL = [[["a man", "A guy", "A person", "a baker"], ["Chef"], ["a boy"]], [["a cake", "bread"]]]
EXPECTED_TEST = [[["the shore", "sand", "the sea"]]]
EXPECTED_COUNTS = {
    "answers read": 19, "answers kept": 11, "dropped: empty after normalization": 1,
    "dropped: repeated by the same annotator": 3, "dropped: not a noun phrase": 3, "dropped: clip in no blanked file": 1,
    "dropped: the clip is an unavailable video": 0, "annotators left with no answer": 1, "clips written": 3,
    "clips left out: unavailable video": 0, "clips left out: no answers": 0,
}


def write_fiber_csv(path, rows):
    """FIBER's layout, with answer_10 and answer_11 present to check the order is numeric."""
    write_csv(path, [{"video_id": video_id, "video_start_time": start, "video_end_time": end, "annotator_id": annotator,
                      **{f"answer_{rank}": "" for rank in range(1, 12)},
                      **{f"answer_{rank}": answer for rank, answer in enumerate(answers, start=1)}}
                     for (video_id, start, end), annotator, answers in rows])


def write_mturk_csv(path, rows):
    """A Mechanical Turk export of one clip per row: extra columns, Answer.* columns out of order, a rejected row."""
    write_csv(path, [{"HITId": f"hit{index}", "WorkerId": annotator, "AssignmentStatus": "Rejected" if index == len(rows)
                      else "Approved", "Input.video_id": video_id, "Input.video_start_time": start,
                      "Input.video_end_time": end, "Answer.comment": "fun!", "Answer.answer10": "",
                      **{f"Answer.answer{rank}": answer for rank, answer in enumerate(answers, start=1)}}
                     for index, ((video_id, start, end), annotator, answers) in enumerate([*rows, rows[0]])])


def write_results(path, rows):
    """A Mechanical Turk results export of two-clip tasks: (WorkerId, the clips, taskAnswers, a rejection time)."""
    written = []
    for worker, clips, answers, *rejection in rows:
        row = {"WorkerId": worker, "AssignmentStatus": "Submitted", "RejectionTime": "".join(rejection)}
        for slot in (1, 2):
            video_id, start, end = clips[slot - 1] if slot <= len(clips) else ("", "", "")
            row |= {f"Input.video{slot}_id": video_id, f"Input.video{slot}_start_time": start,
                    f"Input.video{slot}_end_time": end, f"Input.question{slot}": "A &quot;caption&quot; _____"}
        written.append({**row, "Answer.taskAnswers": json.dumps(answers)})
    write_csv(path, written)


def write_task_csv(path, rows):
    """The release's task layout, one task per row (its second slot empty), and a rejected copy of the first."""
    tasks = [(annotator, [clip], [{f"answer-1-{rank}": answer for rank, answer in enumerate(answers, start=1)}])
             for clip, annotator, answers in rows]
    write_results(path, [*tasks, (*tasks[0], "Tue Nov 24 10:00:00 PST 2026")])


@pytest.fixture
def blanked(tmp_path):
    paths = tmp_path / "val.json", tmp_path / "test.json"
    for path, records in zip(paths, (VAL, TEST)):
        path.write_text(json.dumps(records))
    return paths


def merge(blanked, answers_files, output_dir, *extra):
    arguments = ["--blanked_files", *blanked, "--answers_files", *answers_files, "--output_dir", output_dir, *extra]
    return main(["answers", *map(str, arguments), "--spacy_model", PIPELINE])


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
        assert "skipped 1 rows of rejected assignments" in caplog.text


def test_answers_split_over_files_and_layouts_merge_in_file_order_and_non_noun_phrases_can_be_kept(tmp_path, blanked):
    first, second, third = tmp_path / "first.csv", tmp_path / "second.csv", tmp_path / "third.csv"
    write_fiber_csv(first, ROWS[:3])
    write_task_csv(second, ROWS[3:5])
    write_mturk_csv(third, ROWS[5:])
    merge(blanked, [first, second, third], tmp_path / "out")
    assert additional_answers(tmp_path / "out" / "val.json") == EXPECTED_VAL
    merge(blanked, [first, second, third], tmp_path / "kept", "--keep_non_noun_phrases")
    kept = [[["a man", "A guy", "A person", "a baker"], ["Chef", "is cutting"], ["a boy"]],
            [["a cake", "a cake in", "bread"], ["cake and"]]]
    assert additional_answers(tmp_path / "kept" / "val.json") == kept


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


def test_the_release_layout_several_clips_per_task_unavailable_videos_and_rejections(tmp_path, blanked, caplog):
    first_task = [("vid_a_1", 0, 10), ("vid-b", 5, 15)]
    last_task = [("vid_c", 20, 30)]  # the remainder: its second slot is empty
    results = tmp_path / "Batch_123_batch_results.csv"
    write_results(results, [
        # Keys in any order, ranks compared as numbers, the release page's pending text box last.
        ("w1", first_task, [{"answer-1-2": "a chef", "answer-1-1": "a man", "answer-1-10": "a cook", "answer-1-9": "a baker",
                             "answer-input-1": "a woman", "answer-2-1": "a cake", "answer-2-2": "bread", "comments": "fun",
                             "answer-input-2": ""}]),
        ("w2", first_task, [{"answer-1-1": "a person", "answer-2-1": "Unavailable video"}]),
        ("w3", last_task, [{"answer-1-1": "the sand"}, {"answer-1-2": "the sea"}]),
        ("w4", last_task, [{"answer-1-1": "a cat", "answer-1-2": "a dog"}], "Tue Nov 24 10:00:00 PST 2026"),
        ("w5", last_task, [{"comments": "the video did not load"}]),
    ])
    with caplog.at_level(logging.INFO):
        assert merge(blanked, [results], tmp_path / "out") == 0
    assert additional_answers(tmp_path / "out" / "val.json") == [[["a man", "a chef", "a baker", "a cook", "a woman"],
                                                                  ["a person"]]]
    assert additional_answers(tmp_path / "out" / "test.json") == [[["the sand", "the sea"]]]
    counts = logged_counts(caplog)
    assert counts["dropped: the clip is an unavailable video"] == 3  # w1's two and w2's report
    assert (counts["clips left out: unavailable video"], counts["clips written"]) == (1, 2)
    assert counts["annotators left with no answer"] == 1  # w5
    assert "skipped 1 rows of rejected assignments" in caplog.text
    assert "Clip ('vid-b', 5, 15) is an unavailable video: left out" in caplog.text


BAD_VAL = [
    blanked_record("vid_a", "A man is cutting a cake in the kitchen.", "a cake", start=0, end=10),
    blanked_record("vid_b", "A dog runs on the beach.", "the beach", start=5, end=15),
]
HEADER = "video_id,video_start_time,video_end_time,annotator_id,answer_1,answer_2\n"
ANSWERS = HEADER + "vid_a,0,10,w1,a cake,bread\nvid_b,5,15,w1,the sand,\nvid_b,5,15,w2,the shore,the sea\n"
EXPECTED = [[["a cake", "bread"]], [["the sand"], ["the shore", "the sea"]]]
TASK_HEADER = "WorkerId,Input.video1_id,Input.video1_start_time,Input.video1_end_time,Input.video2_id," \
              "Input.video2_start_time,Input.video2_end_time,Answer.taskAnswers\n"


def task(answers: str, second_clip: str = "vid_b,5,15", header: str = TASK_HEADER) -> bytes:
    """An answers file of the task layout: a row answering vid_a (and vid_b), `answers` its Answer.taskAnswers cell."""
    return (header + f'w1,vid_a,0,10,{second_clip},"{answers.replace(chr(34), chr(34) * 2)}"\n').encode()


def with_record(**fields) -> bytes:
    return json.dumps([{**BAD_VAL[0], **fields}, BAD_VAL[1]]).encode()


def answers_with(row: str) -> bytes:
    return (ANSWERS + row).encode()


# (case, files to change (name -> bytes, or the answers file's bytes), flags to change, exit status, the line)
REFUSED = [
    ("blanked file not UTF-8", {"val.json": json.dumps(BAD_VAL).replace("kitchen", "k\udce9tchen").encode(
        "utf-8", "surrogateescape")}, {}, 1, r"val.json: record 0: holds bytes that are not UTF-8 text \(byte 0xe9\)"),
    ("answers file not UTF-8", answers_with("vid_b,5,15,w3,caf") + b"\xe9\n", {}, 1,
     r"answers.csv, line 5: byte 18 of the line \(0xe9\) is not UTF-8"),
    ("blanked video id escaping a folder", {"val.json": with_record(video_id="../x")}, {}, 1,
     r"val.json: record 0: field 'video_id': '../x' is not a plain video id"),
    ("a clip twice in the blanked files", {"test.json": json.dumps([BAD_VAL[1]]).encode()},
     {"--blanked_files": ["{tmp}/val.json", "{tmp}/test.json"]}, 1, r"test.json: record 0: clip .* is also record 1 of"),
    ("two blanked files of one name", {"other/val.json": json.dumps([BAD_VAL[1]]).encode()},
     {"--blanked_files": ["{tmp}/val.json", "{tmp}/other/val.json"]}, 2, r"--blanked_files must have different names"),
    ("output folder holding the blanked file", {}, {"--output_dir": ["{tmp}"]}, 2,
     r"--output_dir .*/val.json is an input of this command"),
    ("output folder that is the answers file", {}, {"--output_dir": ["{tmp}/answers.csv"]}, 2,
     r"--output_dir .*answers.csv is a file, not a folder"),
    ("answers file empty", b"", {}, 1, r"answers.csv: empty, no header line"),
    ("answers header naming a column twice", ANSWERS.replace("answer_2", "answer_1", 1).encode(), {}, 1,
     r"answers.csv, line 1: the header names column 'answer_1' twice"),
    ("answers without an annotator id", answers_with("vid_b,5,15,,sand,\n"), {}, 1,
     r"answers.csv, line 5: field 'annotator_id' is empty"),
    ("answers without an id column", ANSWERS.replace("video_end_time", "end").encode(), {}, 1,
     r"answers.csv: the fiber layout needs the columns \['video_end_time'\], which are missing"),
    ("answers without answer columns", b"video_id,video_start_time,video_end_time,annotator_id\n", {}, 1,
     r"answers.csv: the fiber layout needs answer columns matching"),
    ("a time that is no number", answers_with("vid_b,5,1O,w3,sand,\n"), {}, 1,
     r"answers.csv, line 5, column 'video_end_time': must be a whole number of seconds from 0 to 2,147,483,647, got '1O'"),
    ("a 5,000-digit time", answers_with(f"vid_b,{'7' * 5000},15,w3,sand,\n"), {}, 1,
     r"answers.csv, line 5, column 'video_start_time': must be a whole number of seconds .*, got '7{20,}\.\.\.7{20,}'$"),
    ("a row of more cells than columns", answers_with("vid_b,5,15,w3,a,b,c\n"), {}, 1,
     r"answers.csv, line 5: 7 cells, but the header has 6"),
    ("a NUL byte", answers_with("vid_b,5,15,w3,sa\0nd,\n"), {}, 1, r"line 5: holds a NUL character \(a UTF-16 file\?\)"),
    ("a 1 MB answer", answers_with("vid_b,5,15,w3," + "x" * 2**20 + ",\n"), {}, 1, r"line 5: field larger than field limit"),
    ("task answers not JSON", task('[{"answer-1-1": "a cake"'), {}, 1,
     r"answers.csv, line 2, column 'Answer.taskAnswers': invalid JSON at character 24"),
    ("task answers an object", task('{"answer-1-1": "a"}'), {}, 1,
     r"line 2, column 'Answer.taskAnswers': expected a JSON list of objects"),
    ("task answers to a clip the task lacks", task('[{"answer-3-1": "a"}]'), {}, 1,
     r"line 2, column 'Answer.taskAnswers': key 'answer-3-1' answers clip 3, .* clips are \[1, 2\]"),
    ("task answers to an empty slot", task('[{"answer-2-1": "a"}]', ",,"), {}, 1,
     r"line 2, column 'Input.video2_id': empty, but Answer.taskAnswers answers clip 2"),
    ("task layout without a clip's times", task("[]", "vid_b,5", TASK_HEADER.replace(",Input.video2_end_time", "")), {},
     1, r"the task layout needs the columns \['Input.video2_end_time'\]"),
    ("one-clip Mechanical Turk layout without Input.video_id", b"WorkerId,Input.video_start_time,Input.video_end_time,"
     b"Answer.answer1\nw1,0,10,a cake\n", {}, 1, r"the mturk layout needs the columns \['Input.video_id'\]"),
]
ACCEPTED = [
    ("a byte-order mark and Windows line ends", b"\xef\xbb\xbf" + ANSWERS.replace("\n", "\r\n").encode()),
    ("blank lines and short rows", ANSWERS.replace(",bread\n", ",bread\n\n\n").replace("w1,the sand,\n", "w1,the sand\n")
     .encode()),
]


def set_up(tmp_path, files, flags) -> list[str]:
    """The good run's files with `files` changed, and its command line with `flags` changed."""
    files = {"answers.csv": files} if isinstance(files, bytes) else files
    for name, content in {"val.json": json.dumps(BAD_VAL).encode(), "answers.csv": ANSWERS.encode(), **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    arguments = {"--blanked_files": ["{tmp}/val.json"], "--answers_files": ["{tmp}/answers.csv"],
                 "--output_dir": ["{tmp}/out"], "--keep_non_noun_phrases": [], **flags}
    return ["answers"] + [part.format(tmp=tmp_path) for flag, values in arguments.items() for part in (flag, *values)]


@pytest.mark.parametrize(("files", "flags", "status", "message"), cases(REFUSED))
def test_refused_with_one_line_and_nothing_written_or_lost(tmp_path, refused, files, flags, status, message):
    assert refused(tmp_path, status, message, *set_up(tmp_path, files, flags)).startswith("fiberbench answers: error: ")


@pytest.mark.parametrize("files", cases(ACCEPTED))
def test_accepted_variants_give_the_same_answers(tmp_path, files):
    assert main(set_up(tmp_path, files, {})) == 0
    assert additional_answers(tmp_path / "out" / "val.json") == EXPECTED
