"""The crowd's answers as Mechanical Turk or FIBER CSV files give them: one `Submission` per annotator and clip."""

import csv
import io
import itertools
import json
import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fiberbench.errors import DataError
from fiberbench.records import KEY_FIELDS, ClipKey, clip_key, whole_seconds

from .annotation import ANSWER_KEY, PENDING_ANSWER_KEY, input_columns, task_input_value

logger = logging.getLogger(__name__)

CSV_LAYOUTS = """\
Answers CSVs come in three layouts, told apart by their columns: Mechanical Turk results of the
annotation page's tasks (WorkerId, Input.video{i}_id, Input.video{i}_start_time,
Input.video{i}_end_time, Answer.taskAnswers); Mechanical Turk results with one clip per row
(WorkerId, Input.video_id, Input.video_start_time, Input.video_end_time, Answer.answer1, ...); and
FIBER's (video_id, video_start_time, video_end_time, annotator_id, answer_1, answer_2, ...). Rows of
rejected assignments are skipped. See docs/make-your-own-fiber.md.
"""
# Layout name -> (annotator column, clip id columns, answer column pattern with the rank as group 1).
LAYOUTS = {
    "fiber": ("annotator_id", KEY_FIELDS, re.compile(r"answer_(\d+)")),
    "mturk": ("WorkerId", tuple(f"Input.{column}" for column in KEY_FIELDS), re.compile(r"Answer\.\D*(\d+)")),
}
TASK_ANSWERS_COLUMN = "Answer.taskAnswers"
TASK_CLIP_COLUMN = re.compile(r"Input\.video(\d+)_id")
@dataclass(frozen=True)
class Submission:
    """One annotator's answers to one clip, in their order, and where (file, line) they were read."""

    source: str
    clip: ClipKey
    annotator: str
    answers: tuple[str, ...]


class CsvTable:
    """A UTF-8 CSV file (a byte-order mark and Windows line ends accepted), its rows read as column -> cell with the
    line each ends on; every error names the file and the line."""

    def __init__(self, path: Path) -> None:
        self.path, self.rejected = path, 0
        data = path.read_bytes()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            line, column = data.count(b"\n", 0, error.start) + 1, error.start - data.rfind(b"\n", 0, error.start)
            problem = f"byte {column} of the line (0x{data[error.start]:02x}) is not UTF-8; save the file as UTF-8"
            raise DataError(f"{path}, line {line}: {problem}") from error
        if "\0" in text:  # valid UTF-8, but no text holds it: a UTF-16 file without its byte-order mark does
            line = text.count("\n", 0, text.index("\0")) + 1
            raise DataError(f"{path}, line {line}: holds a NUL character (a UTF-16 file?); save the file as UTF-8 text")
        # strict: a stray quote is an error where it stands, never a cell that swallows the lines after it
        self._reader = csv.DictReader(io.StringIO(text, newline=""), restval="", strict=True)
        self.columns = self._reader.fieldnames
        if not self.columns:
            raise DataError(f"{path}: empty, no header line")
        if repeated := sorted(column for column, count in Counter(self.columns).items() if count > 1):
            raise DataError(f"{path}, line 1: the header names column {repeated[0]!r} twice (which one is meant?)")

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        """(line, column -> cell) of the rows after the header, those of rejected assignments skipped and counted."""
        try:
            for row in self._reader:
                line = self._reader.line_num
                if None in row:  # DictReader's key of the cells beyond the header's
                    cells = len(self.columns) + len(row[None])
                    raise DataError(f"{self.path}, line {line}: {cells} cells, but the header has {len(self.columns)}")
                if row.get("AssignmentStatus", "").strip() == "Rejected" or row.get("RejectionTime", "").strip():
                    self.rejected += 1
                else:
                    yield line, row
        except csv.Error as error:  # raised before the reader counts the line it stopped in
            problem = "a quoted cell starts here and is never closed" if "end of data" in str(error) else error
            raise DataError(f"{self.path}, line {self._reader.line_num + 1}: {problem}") from error

    def require(self, columns: Iterable[str], layout: str) -> None:
        if missing := [column for column in columns if column not in self.columns]:
            raise DataError(f"{self.path}: the {layout} layout needs the columns {missing}, which are missing")

    def clip(self, row: dict[str, str], line: int, columns: Iterable[str]) -> ClipKey:
        """The clip of a row: its id (read as `hit-inputs` wrote it) and its times, in `columns`."""
        id_column, *time_columns = columns
        times = []
        for column in time_columns:
            try:
                times.append(whole_seconds(row[column], text=True))
            except ValueError as error:
                raise DataError(f"{self.path}, line {line}, column {column!r}: {error}") from None
        return task_input_value(row[id_column].strip()), *times


def _row_submissions(table: CsvTable) -> Iterator[Submission]:
    """The FIBER and one-clip-per-row Mechanical Turk layouts: one submission per row."""
    layout = "mturk" if "WorkerId" in table.columns else "fiber"
    annotator_column, id_columns, answer_pattern = LAYOUTS[layout]
    table.require((annotator_column, *id_columns), layout)
    ranked = sorted((int(match[1]), column) for column in table.columns if (match := answer_pattern.fullmatch(column)))
    if not ranked:
        raise DataError(f"{table.path}: the {layout} layout needs answer columns matching {answer_pattern.pattern!r}")
    for line, row in table.rows():
        clip = table.clip(row, line, id_columns)
        answers = tuple(filter(None, (row[column].strip() for _, column in ranked)))
        if answers and not row[annotator_column].strip():  # it would be merged with every other such row's
            raise DataError(f"{table.path}, line {line}: field {annotator_column!r} is empty")
        yield Submission(f"{table.path}, line {line}", clip, row[annotator_column], answers)


def task_answers(text: str, where: str, clips: list[int]) -> dict[int, list[str]]:
    """Clip number -> its answers in rank order, from an `Answer.taskAnswers` cell (see `CSV_LAYOUTS`)."""
    where = f"{where}, column {TASK_ANSWERS_COLUMN!r}"
    try:
        objects = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: invalid JSON at character {error.pos}: {error.msg}") from error
    if not isinstance(objects, list) or not all(isinstance(value, dict) for value in objects):
        raise DataError(f"{where}: expected a JSON list of objects, got {text[:80]!r}")
    ranked = defaultdict(list)
    for key, answer in (item for value in objects for item in value.items()):
        if match := ANSWER_KEY.fullmatch(key):
            clip, rank = int(match[1]), int(match[2])
        elif match := PENDING_ANSWER_KEY.fullmatch(key):
            clip, rank = int(match[1]), math.inf
        else:
            continue  # the page's other fields, such as comments
        if clip not in clips:
            raise DataError(f"{where}: key {key!r} answers clip {clip}, but the task's clips are {clips}")
        if not isinstance(answer, str):
            raise DataError(f"{where}: key {key!r} must hold a string, got {json.dumps(answer)}")
        ranked[clip].append((rank, answer.strip()))
    return {clip: [answer for _, answer in sorted(pairs, key=lambda pair: pair[0])] for clip, pairs in ranked.items()}


def _task_submissions(table: CsvTable) -> Iterator[Submission]:
    """The release's task layout: one submission per clip of each row."""
    clips = sorted(int(match[1]) for column in table.columns if (match := TASK_CLIP_COLUMN.fullmatch(column)))
    inputs = {clip: [f"Input.{input_columns(clip)[key]}" for key in KEY_FIELDS] for clip in clips}
    table.require(["WorkerId", TASK_ANSWERS_COLUMN, *itertools.chain(*inputs.values())], "task")
    if not clips:
        raise DataError(f"{table.path}: the task layout needs the clip columns Input.video1_id, Input.video2_id, ...")
    for line, row in table.rows():
        where = f"{table.path}, line {line}"
        if not row["WorkerId"].strip():
            raise DataError(f"{where}: field 'WorkerId' is empty")
        answers_by_clip = task_answers(row[TASK_ANSWERS_COLUMN], where, clips)
        for clip, columns in inputs.items():
            answers = tuple(filter(None, answers_by_clip.get(clip, [])))
            if row[columns[0]].strip():
                yield Submission(where, table.clip(row, line, columns), row["WorkerId"], answers)
            elif answers:
                raise DataError(f"{where}, column {columns[0]!r}: empty, but Answer.taskAnswers answers clip {clip}")


def read_submissions(path: Path) -> Iterator[Submission]:
    """The submissions of an answers CSV in any layout of `CSV_LAYOUTS`, rejected assignments skipped."""
    table = CsvTable(path)
    yield from (_task_submissions if TASK_ANSWERS_COLUMN in table.columns else _row_submissions)(table)
    if table.rejected:
        logger.info("%s: skipped %d rows of rejected assignments", path, table.rejected)


def check_unique_clips(files: dict[Path, list[dict]]) -> None:
    """Answers are matched to clips by ids and times, so a clip in two places is an error naming both."""
    first_seen: dict[ClipKey, tuple[Path, int]] = {}
    for path, records in files.items():
        for index, record in enumerate(records):
            if (first := first_seen.setdefault(clip_key(record), (path, index))) != (path, index):
                problem = f"clip {clip_key(record)} is also record {first[1]} of {first[0]}"
                raise DataError(f"{path}: record {index}: {problem}")
