"""`fiberbench answers`: merge crowd answers into the release format's `additional_answers`.

As in the paper (§3.2), each annotator's order is kept, an annotator's repeats after normalization are dropped, and
only answers that are noun phrases in the blank's context are kept. As the release did, clips that an annotator
reported as an "unavailable video" and clips left with no answers are left out of the output; every drop is counted.
"""

import argparse
import csv
import io
import itertools
import json
import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fiberbench.cli import add_output_arguments, positive_int
from fiberbench.errors import DataError, UsageError
from fiberbench.json_records import write_json_records
from fiberbench.metric import normalize_answer
from fiberbench.modeling.noun_phrases import are_noun_phrases, load_spacy_pipeline
from fiberbench.outputs import check_output, finish_output, output_lock, start_output
from fiberbench.records import ClipKey, clip_key, read_release_records, whole_seconds

from .annotation import ANSWER_KEY, PENDING_ANSWER_KEY, input_columns, is_unavailable_video, task_input_value

logger = logging.getLogger(__name__)

COMMAND = "fiberbench answers"
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
    "fiber": ("annotator_id", ("video_id", "video_start_time", "video_end_time"), re.compile(r"answer_(\d+)")),
    "mturk": ("WorkerId", tuple(f"Input.{column}" for column in ("video_id", "video_start_time", "video_end_time")),
              re.compile(r"Answer\.\D*(\d+)")),
}
TASK_ANSWERS_COLUMN = "Answer.taskAnswers"
TASK_CLIP_COLUMN = re.compile(r"Input\.video(\d+)_id")
# What `merge_answers` counts, in the order it is logged: every answer read is kept or dropped for one reason, and
# every clip is written or left out for one reason.
COUNTS = (
    "answers read", "answers kept", "dropped: empty after normalization", "dropped: repeated by the same annotator",
    "dropped: not a noun phrase", "dropped: clip in no blanked file", "dropped: the clip is an unavailable video",
    "annotators left with no answer", "clips written", "clips left out: unavailable video",
    "clips left out: no answers",
)


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
        self._reader = csv.DictReader(io.StringIO(text, newline=""), restval="")
        self.columns = self._reader.fieldnames
        if not self.columns:
            raise DataError(f"{path}: empty, no header line")
        if repeated := sorted({column for column in self.columns if self.columns.count(column) > 1}):
            raise DataError(f"{path}, line 1: the header names column {repeated[0]!r} twice (which one is meant?)")

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        """(line, column -> cell) of the rows after the header (missing cells at a row's end read as ''), those of
        rejected assignments skipped and counted (`rejected`)."""
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
            raise DataError(f"{self.path}, line {self._reader.line_num + 1}: {error}") from error

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
    keys = ("video_id", "video_start_time", "video_end_time")
    inputs = {clip: [f"Input.{input_columns(clip)[key]}" for key in keys] for clip in clips}
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


@dataclass
class ClipAnswers:
    """One clip's answers so far, in reading order, and its annotators in first-seen order."""

    masked_caption: str
    annotators: dict[str, None] = field(default_factory=dict)  # an ordered set
    answers: list[tuple[str, str]] = field(default_factory=list)  # (annotator, answer)
    seen: set[tuple[str, str]] = field(default_factory=set)  # (annotator, normalized answer)
    unavailable: bool = False


def _collect(records: list[dict], submissions: Iterable[Submission], counts: Counter) -> dict[ClipKey, ClipAnswers]:
    """Each clip's answers, empties and an annotator's repeats dropped, unavailable videos marked."""
    clips = {clip_key(record): ClipAnswers(record["masked_caption"]) for record in records}
    for submission in submissions:
        counts["answers read"] += len(submission.answers)
        clip = clips.get(submission.clip)
        if clip is None:
            logger.warning("%s: clip %s is in no blanked file; answers dropped", submission.source, submission.clip)
            counts["dropped: clip in no blanked file"] += len(submission.answers)
            continue
        clip.annotators[submission.annotator] = None
        for answer in submission.answers:
            normalized = normalize_answer(answer)
            if is_unavailable_video(answer):
                clip.unavailable = True
                counts["dropped: the clip is an unavailable video"] += 1
            elif not normalized:
                counts["dropped: empty after normalization"] += 1
            elif (submission.annotator, normalized) in clip.seen:
                counts["dropped: repeated by the same annotator"] += 1
            else:
                clip.seen.add((submission.annotator, normalized))
                clip.answers.append((submission.annotator, answer))
    for key, clip in clips.items():
        if clip.unavailable:
            logger.info("Clip %s is an unavailable video: left out", key)
            counts["dropped: the clip is an unavailable video"] += len(clip.answers)
            clip.answers = []
    return clips


def merge_answers(records: list[dict], submissions: Iterable[Submission], nlp, batch_size=256) -> tuple[list, Counter]:
    """The `records` (each clip once) that end up with answers, their `additional_answers` the submissions' (those
    that are noun phrases in their blank, parsed in one `nlp.pipe`; all with `nlp=None`), and every reason an answer
    or a clip was dropped counted: answers read = answers kept + the answers dropped."""
    counts = Counter(dict.fromkeys(COUNTS, 0))
    clips = _collect(records, submissions, counts)
    if nlp is None:
        del counts["dropped: not a noun phrase"]
        keep = itertools.repeat(True)
    else:
        pairs = [(clip.masked_caption, answer) for clip in clips.values() for _, answer in clip.answers]
        are_nps = are_noun_phrases([caption for caption, _ in pairs], [answer for _, answer in pairs], nlp, batch_size)
        counts["dropped: not a noun phrase"] = are_nps.count(False)
        keep = iter(are_nps)
    merged = []
    for record, clip in zip(records, clips.values()):
        by_annotator = {annotator: [] for annotator in clip.annotators}
        for annotator, answer in clip.answers:
            if next(keep):
                by_annotator[annotator].append(answer)
        additional_answers = [answers for answers in by_annotator.values() if answers]
        counts["answers kept"] += sum(map(len, additional_answers))
        if clip.unavailable:
            counts["clips left out: unavailable video"] += 1
        elif not additional_answers:
            counts["clips left out: no answers"] += 1
        else:
            counts["annotators left with no answer"] += len(by_annotator) - len(additional_answers)
            merged.append({**record, "additional_answers": additional_answers})
    counts["clips written"] = len(merged)
    return merged, counts


def check_unique_clips(files: dict[Path, list[dict]]) -> None:
    """Answers are matched to clips by ids and times, so a clip in two places is an error naming both."""
    first_seen: dict[ClipKey, tuple[Path, int]] = {}
    for path, records in files.items():
        for index, record in enumerate(records):
            first_path, first_index = first_seen.setdefault(clip_key(record), (path, index))
            if (first_path, first_index) != (path, index):
                problem = f"clip {clip_key(record)} is also record {first_index} of {first_path}"
                raise DataError(f"{path}: record {index}: {problem}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = CSV_LAYOUTS
    parser.add_argument("--blanked_files", nargs="+", type=Path, required=True, help="Blanked release-format files.")
    parser.add_argument("--answers_files", nargs="+", type=Path, required=True, help="Answers CSVs (layouts below).")
    add_output_arguments(
        parser, "Each blanked file is written here under its own name, with additional_answers.",
        "Replace files in --output_dir that an earlier answers run wrote (never other files).", folder=True,
    )
    parser.add_argument("--spacy_model", help="spaCy pipeline of the noun-phrase rule (default: as `blank`'s).")
    parser.add_argument("--batch_size", type=positive_int, default=256, help="Texts per nlp.pipe batch.")
    parser.add_argument("--keep_non_noun_phrases", action="store_true", help="Skip the noun-phrase filter.")


def run(args: argparse.Namespace) -> int:
    if len({path.name for path in args.blanked_files}) != len(args.blanked_files):
        raise UsageError(f"--blanked_files must have different names, got {[str(path) for path in args.blanked_files]}")
    if args.output_dir.exists() and not args.output_dir.is_dir():
        raise UsageError(f"--output_dir {args.output_dir} is a file, not a folder")
    outputs = [args.output_dir / path.name for path in args.blanked_files]
    inputs = [*args.blanked_files, *args.answers_files]
    with output_lock(args.output_dir, "--output_dir"):
        for output in outputs:
            check_output(
                output, command=COMMAND, flag="--output_dir", overwrite=args.overwrite_output_dir, inputs=inputs
            )
        files = {path: read_release_records(path) for path in args.blanked_files}
        check_unique_clips(files)
        # Every answers file is read and checked before the (slow) pipeline loads.
        submissions = [submission for path in args.answers_files for submission in read_submissions(path)]
        nlp = None if args.keep_non_noun_phrases else load_spacy_pipeline(args.spacy_model)
        all_records = [record for records in files.values() for record in records]
        merged, counts = merge_answers(all_records, submissions, nlp, args.batch_size)
        kept = {clip_key(record): record for record in merged}
        for output, records in zip(outputs, files.values()):
            record = start_output(output, COMMAND, None, folder=False)
            written = write_json_records(output, (kept[key] for key in map(clip_key, records) if key in kept))
            finish_output(output, record)
            logger.info("Wrote %s (%d of its %d clips)", output, written, len(records))
    for reason, count in counts.items():
        logger.info("%s: %d", reason, count)
    return 0
