"""Bad inputs to `fiberbench answers`: one line naming the file (line, column, record, field), the exit status, nothing lost.

Each case changes the files of a good run (a blanked val.json and a FIBER-layout answers.csv) or
its flags. A refused run must leave its inputs and the previous output as they were and write
nothing else; an accepted variant must give the good run's output.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from .conftest import blanked_record

VAL = [
    blanked_record("vid_a", "A man is cutting a cake in the kitchen.", "a cake", start=0, end=10),
    blanked_record("vid_b", "A dog runs on the beach.", "the beach", start=5, end=15),
]
HEADER = "video_id,video_start_time,video_end_time,annotator_id,answer_1,answer_2\n"
ANSWERS = HEADER + "vid_a,0,10,w1,a cake,bread\nvid_b,5,15,w1,the sand,\nvid_b,5,15,w2,the shore,the sea\n"
EXPECTED = [[["a cake", "bread"]], [["the sand"], ["the shore", "the sea"]]]
TASK_HEADER = (
    "WorkerId,Input.video1_id,Input.video1_start_time,Input.video1_end_time,"
    "Input.video2_id,Input.video2_start_time,Input.video2_end_time,Answer.taskAnswers\n"
)


def task_row(answers: str, second_clip: str = "vid_b,5,15") -> str:
    """A task-layout row answering vid_a (and vid_b), `answers` being the Answer.taskAnswers cell."""
    quoted = answers.replace('"', '""')
    return f'w1,vid_a,0,10,{second_clip},"{quoted}"\n'


def record_with(**fields) -> bytes:
    return json.dumps([{**VAL[0], **fields}, VAL[1]]).encode()


# (case id, files to change (name -> bytes, None to remove), flags to change, exit status, message pattern)
REFUSED = [
    ("blanked file missing", {"val.json": None}, {}, 1, r"val.json: No such file or directory"),
    ("answers file missing", {"answers.csv": None}, {}, 1, r"answers.csv: No such file or directory"),
    ("blanked file is a folder", {"val.json": "folder"}, {}, 1, r"val.json: Is a directory"),
    ("answers file is a folder", {"answers.csv": "folder"}, {}, 1, r"answers.csv: Is a directory"),
    ("blanked file not UTF-8", {"val.json": json.dumps(VAL, indent=1).replace("kitchen", "k\udce9tchen").encode(
        "utf-8", "surrogateescape")}, {}, 1, r"val.json: record 0: holds bytes that are not UTF-8 text \(byte 0xe9\)"),
    ("answers file not UTF-8", {"answers.csv": (HEADER + "vid_a,0,10,w1,a cake,bread\nvid_b,5,15,w1,caf").encode()
                                + b"\xe9\n"}, {}, 1, r"answers.csv, line 3: byte 18 of the line \(0xe9\) is not UTF-8"),
    ("blanked JSON cut short", {"val.json": json.dumps(VAL).encode()[:-40]}, {}, 1, r"val.json: .*(not closed|invalid)"),
    ("blanked JSON a 1 MB caption cut short", {"val.json": b'[{"video_id": "vid_a", "caption": "' + b"x" * 2**20},
     {}, 1, r"val.json: record 0: invalid JSON"),
    ("blanked record not an object", {"val.json": b"[1, 2]"}, {}, 1, r"val.json: record 0: expected a JSON object"),
    ("blanked record without masked_caption", {"val.json": json.dumps([{k: v for k, v in VAL[0].items()
     if k != "masked_caption"}]).encode()}, {}, 1, r"val.json: record 0: field 'masked_caption': missing"),
    ("blanked time as a string", {"val.json": record_with(video_start_time="0")}, {}, 1,
     r"val.json: record 0: field 'video_start_time': must be a whole number of seconds from 0 to 2,147,483,647, got '0'"),
    ("blanked video id escaping a folder", {"val.json": record_with(video_id="../x")}, {}, 1,
     r"val.json: record 0: field 'video_id': '../x' is not a plain video id"),
    ("blanked caption with two blanks", {"val.json": record_with(masked_caption="_____ cuts _____.", caption=None)},
     {}, 1, r"val.json: record 0: field 'masked_caption': expected exactly one blank"),
    ("a clip twice in the blanked files", {"test.json": json.dumps([VAL[1]]).encode()},
     {"--blanked_files": ["{tmp}/val.json", "{tmp}/test.json"]}, 1, r"test.json: record 0: clip .* is also record 1 of"),
    ("two blanked files of one name", {"other/val.json": json.dumps([VAL[1]]).encode(), "val.json": json.dumps(
        [VAL[0]]).encode()}, {"--blanked_files": ["{tmp}/val.json", "{tmp}/other/val.json"]}, 2,
     r"--blanked_files must have different names"),
    ("output folder holding the blanked file", {}, {"--output_dir": ["{tmp}"]}, 2,
     r"--output_dir .*/val.json is an input of this command"),
    ("output folder that is the answers file", {}, {"--output_dir": ["{tmp}/answers.csv"]}, 2,
     r"--output_dir .*answers.csv/val.json: .*answers.csv is a file, not a folder"),
    # Checked before any work: the answers file, empty, would be refused otherwise.
    ("output folder that is an existing file", {"afile": b"mine\n", "answers.csv": b""}, {"--output_dir": ["{tmp}/afile"]},
     2, r"--output_dir .*afile/val.json: .*afile is a file, not a folder"),
    ("batch size 0", {}, {"--batch_size": ["0"]}, 2, r"--batch_size: must be at least 1, got 0"),
    ("answers file empty", {"answers.csv": b""}, {}, 1, r"answers.csv: empty, no header line"),
    ("answers header naming a column twice", {"answers.csv": ANSWERS.replace("answer_2", "answer_1", 1).encode()}, {},
     1, r"answers.csv, line 1: the header names column 'answer_1' twice"),
    ("answers without an annotator id", {"answers.csv": (ANSWERS + "vid_b,5,15,,sand,\n").encode()}, {}, 1,
     r"answers.csv, line \d+: field 'annotator_id' is empty"),
    ("answers without an id column", {"answers.csv": ANSWERS.replace("video_end_time", "end").encode()}, {}, 1,
     r"answers.csv: the fiber layout needs the columns \['video_end_time'\], which are missing"),
    ("answers without answer columns", {"answers.csv": b"video_id,video_start_time,video_end_time,annotator_id\n"},
     {}, 1, r"answers.csv: the fiber layout needs answer columns matching"),
    ("answers with a time that is no number", {"answers.csv": (ANSWERS + "vid_b,5,1O,w3,sand,\n").encode()}, {}, 1,
     r"answers.csv, line 5, column 'video_end_time': must be a whole number of seconds from 0 to 2,147,483,647, got '1O'"),
    ("answers with a negative time", {"answers.csv": (ANSWERS + "vid_b,-5,15,w3,sand,\n").encode()}, {}, 1,
     r"answers.csv, line 5, column 'video_start_time': must be a whole number of seconds .*, got '-5'"),
    ("answers with a superscript time", {"answers.csv": (ANSWERS + "vid_b,\u00b2,15,w3,sand,\n").encode()}, {}, 1,
     r"answers.csv, line 5, column 'video_start_time': must be a whole number of seconds .*, got '\u00b2'"),
    ("answers with a 5,000-digit time", {"answers.csv": (ANSWERS + f"vid_b,{'7' * 5000},15,w3,sand,\n").encode()}, {},
     1, r"answers.csv, line 5, column 'video_start_time': must be a whole number of seconds .*, got '7{20,}\.\.\.7{20,}'$"),
    ("answers row with more cells than columns", {"answers.csv": (ANSWERS + "vid_b,5,15,w3,a,b,c\n").encode()}, {}, 1,
     r"answers.csv, line 5: 7 cells, but the header has 6"),
    ("answers with a NUL byte", {"answers.csv": (ANSWERS + "vid_b,5,15,w3,sa\0nd,\n").encode()}, {}, 1,
     r"answers.csv, line 5: holds a NUL character \(a UTF-16 file\?\)"),
    ("answers in UTF-16 without a byte-order mark", {"answers.csv": ANSWERS.encode("utf-16-le")}, {}, 1,
     r"answers.csv, line 1: holds a NUL character"),
    ("answers with a 1 MB answer", {"answers.csv": (ANSWERS + "vid_b,5,15,w3," + "x" * 2**20 + ",\n").encode()}, {},
     1, r"answers.csv, line 5: field larger than field limit"),
    ("task answers not JSON", {"answers.csv": (TASK_HEADER + task_row('[{"answer-1-1": "a cake"')).encode()}, {}, 1,
     r"answers.csv, line 2, column 'Answer.taskAnswers': invalid JSON at character 24"),
    ("task answers an object, not a list", {"answers.csv": (TASK_HEADER + task_row('{"answer-1-1": "a"}')).encode()},
     {}, 1, r"line 2, column 'Answer.taskAnswers': expected a JSON list of objects"),
    ("task answers to a clip the task lacks", {"answers.csv": (TASK_HEADER + task_row('[{"answer-3-1": "a"}]'))
     .encode()}, {}, 1, r"line 2, column 'Answer.taskAnswers': key 'answer-3-1' answers clip 3, .* clips are \[1, 2\]"),
    ("task answer that is no string", {"answers.csv": (TASK_HEADER + task_row('[{"answer-1-1": 5}]')).encode()}, {},
     1, r"column 'Answer.taskAnswers': key 'answer-1-1' must hold a string, got 5"),
    ("task answers to an empty slot", {"answers.csv": (TASK_HEADER + task_row('[{"answer-2-1": "a"}]', ",,"))
     .encode()}, {}, 1, r"line 2, column 'Input.video2_id': empty, but Answer.taskAnswers answers clip 2"),
    ("task layout without a clip's times", {"answers.csv": (TASK_HEADER.replace(",Input.video2_end_time", "") +
     task_row("[]", "vid_b,5")).encode()}, {}, 1, r"the task layout needs the columns \['Input.video2_end_time'\]"),
    ("task layout without WorkerId", {"answers.csv": (TASK_HEADER.replace("WorkerId", "Worker") +
     task_row("[]")).encode()}, {}, 1, r"the task layout needs the columns \['WorkerId'\]"),
    ("one-clip Mechanical Turk layout without Input.video_id", {"answers.csv": b"WorkerId,Input.video_start_time,"
     b"Input.video_end_time,Answer.answer1\nw1,0,10,a cake\n"}, {}, 1,
     r"the mturk layout needs the columns \['Input.video_id'\]"),
]
ACCEPTED = [
    ("a byte-order mark", {"answers.csv": b"\xef\xbb\xbf" + ANSWERS.encode()}),
    ("Windows line ends", {"answers.csv": ANSWERS.replace("\n", "\r\n").encode()}),
    ("a byte-order mark and Windows line ends", {"answers.csv": b"\xef\xbb\xbf" + ANSWERS.replace("\n", "\r\n").encode()}),
    ("blank lines and short rows", {"answers.csv": ANSWERS.replace(",bread\n", ",bread\n\n\n").replace(
        "w1,the sand,\n", "w1,the sand\n").encode()}),
    ("the task layout, Windows line ends", {"answers.csv": (TASK_HEADER + task_row(
        '[{"answer-1-1": "a cake", "answer-1-2": "bread", "answer-2-1": "the sand"}]') + task_row(
        '[{"answer-2-1": "the shore", "answer-2-2": "the sea"}]').replace("w1,", "w2,", 1)).replace("\n", "\r\n")
        .encode()}),
]


def set_up(tmp_path, files, flags):
    """The good run's files with `files` changed, and its command line with `flags` changed."""
    contents = {"val.json": json.dumps(VAL).encode(), "answers.csv": ANSWERS.encode(), **files}
    for name, content in contents.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == "folder":
            path.mkdir()
        elif content is not None:
            path.write_bytes(content)
    arguments = {
        "--blanked_files": ["{tmp}/val.json"],
        "--answers_files": ["{tmp}/answers.csv"],
        "--output_dir": ["{tmp}/out"],
        "--keep_non_noun_phrases": [],
        **flags,
    }
    return ["answers"] + [
        part.format(tmp=tmp_path) for flag, values in arguments.items() for part in (flag, *values)
    ]


def snapshot(folder):
    return {path: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize(
    "files, flags, status, message", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
def test_refused_with_one_line_and_nothing_written_or_lost(
    tmp_path, cli_error, earlier_output, files, flags, status, message
):
    command = set_up(tmp_path, files, flags) + ["--overwrite_output_dir"]
    if not (tmp_path / "out").exists():
        earlier_output(tmp_path / "out" / "val.json", "fiberbench answers")
    before = snapshot(tmp_path)
    actual_status, line = cli_error(*command)
    assert actual_status == status and re.search(message, line), line
    assert line.startswith("fiberbench answers: error: ")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("files", [case[1] for case in ACCEPTED], ids=[case[0] for case in ACCEPTED])
def test_accepted_variants_give_the_same_answers(tmp_path, files):
    from fiberbench.cli import main

    assert main(set_up(tmp_path, files, {})) == 0
    written = json.loads((tmp_path / "out" / "val.json").read_text())
    assert [record["additional_answers"] for record in written] == EXPECTED


def test_the_matrix_counts():
    assert (len(REFUSED), len(ACCEPTED)) == (40, 5)


@pytest.mark.slow
def test_a_run_killed_while_writing_leaves_the_previous_output_whole(tmp_path, earlier_output):
    """SIGKILL `fiberbench answers` (a real process) while it writes its output: the old file stays as it was."""
    clips = 20_000
    blanked = tmp_path / "val.json"
    with blanked.open("w") as file:
        file.write("[\n")
        for index in range(clips):
            record = {**VAL[1], "video_id": f"v{index}", "caption": None, "masked_caption": f"Clip {index} of _____."}
            file.write(("," if index else "") + json.dumps({k: v for k, v in record.items() if v is not None}) + "\n")
        file.write("]\n")
    answers = tmp_path / "answers.csv"
    answers.write_text(HEADER + "".join(f"v{index},5,15,w1,sand,the shore\n" for index in range(clips)))
    output = earlier_output(tmp_path / "out" / "val.json", "fiberbench answers", json.dumps(VAL).encode())
    previous = output.read_bytes()

    # At the lowest priority (`nice` runs the command in its own process): the run writes its output in a tenth of a
    # second, and on a busy machine this test's polling then still comes first, in time to see it writing.
    process = subprocess.Popen(
        ["nice", "-n", "19", sys.executable, "-m", "fiberbench.cli", "answers", "--blanked_files", blanked,
         "--answers_files", answers, "--output_dir", output.parent, "--keep_non_noun_phrases", "--overwrite_output_dir"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    # The atomic writer's temporary file beside the output: once it is there, the run is writing.
    while not [name for name in os.listdir(output.parent) if name.startswith(".val.json.incomplete-")]:
        assert process.poll() is None, "the run ended before it was seen writing"
        assert time.monotonic() < deadline
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    assert output.read_bytes() == previous
    record = json.loads((output.parent / "val.metadata.json").read_text())
    assert record["state"] == "running" and record["pid"] == process.pid  # the output says it is unfinished
    (temporary,) = [path for path in output.parent.glob(".val.json.*") if not path.name.endswith(".lock")]
    with pytest.raises(json.JSONDecodeError):  # the new output, cut short, never took the old one's place
        json.loads(temporary.read_text())
