"""`fiberbench answers`: merge crowd answers into the release format's `additional_answers`.

As in the paper (§3.2), each annotator's order is kept, an annotator's repeats after
normalization are dropped, and only answers that are noun phrases in the blank's context are kept.
As the release did, clips that an annotator reported as an "unavailable video" and clips left with
no answers are left out of the output, and counted. The CSV layouts read are described in
`CSV_LAYOUTS` (also shown by `fiberbench answers --help`).
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
from typing import TYPE_CHECKING

from fiberbench.cli import add_output_arguments, positive_int
from fiberbench.collector import collector_held_off
from fiberbench.errors import DataError, UsageError
from fiberbench.files import check_input_files
from fiberbench.ownership import Output, arguments_of, open_all

from .annotation import ANSWER_KEY, PENDING_ANSWER_KEY, input_columns, is_unavailable_video, task_input_value
from fiberbench.records import ClipKey, clip_key
from fiberbench.json_records import write_json_records

if TYPE_CHECKING:
    from spacy.language import Language

logger = logging.getLogger(__name__)

CSV_LAYOUTS = """\
Answers CSVs come in three layouts, told apart by their columns:

- Mechanical Turk results of the annotation page's tasks (see `fiberbench hit-inputs`), as the
  release collected its answers: one row per assignment with WorkerId, for each clip i of the task
  the inputs Input.video{i}_id, Input.video{i}_start_time and Input.video{i}_end_time, and
  Answer.taskAnswers, a JSON list of objects whose keys answer-{i}-{rank} hold the answers, ordered
  by rank, most natural first (an answer-input-{i} key, the text left in the box of the release's
  page, comes last). Empty clip slots of a task's last row are ignored. The inputs are read as
  `fiberbench hit-inputs` writes them, HTML (an id starting with "-" is written "&#45;...").
- Mechanical Turk results with one clip per row: WorkerId, Input.video_id, Input.video_start_time,
  Input.video_end_time, and one Answer.<name><n> column per answer, n its rank (Answer.answer1,
  Answer.answer2, ...).
- FIBER's: video_id, video_start_time, video_end_time, annotator_id, and one column per answer,
  answer_1, answer_2, ... in the annotator's order, most natural first (blank cells are ignored,
  so rows may hold different numbers of answers).

Rows of rejected assignments (AssignmentStatus "Rejected", or a RejectionTime) are skipped. Files
are UTF-8, may start with a byte-order mark and may have Windows line ends.
"""

# Layout name -> (annotator column, clip id columns, answer column pattern with the rank as group 1).
LAYOUTS = {
    "fiber": (
        "annotator_id",
        ("video_id", "video_start_time", "video_end_time"),
        re.compile(r"answer_(\d+)"),
    ),
    "mturk": (
        "WorkerId",
        ("Input.video_id", "Input.video_start_time", "Input.video_end_time"),
        re.compile(r"Answer\.\D*(\d+)"),
    ),
}
TASK_ANSWERS_COLUMN = "Answer.taskAnswers"
TASK_CLIP_COLUMN = re.compile(r"Input\.video(\d+)_id")
# What `merge_answers` counts, in the order it is logged: every answer read is kept or dropped for
# one reason, and every clip is written or left out for one reason.
COUNTS = (
    "answers read",
    "answers kept",
    "dropped: empty after normalization",
    "dropped: repeated by the same annotator",
    "dropped: not a noun phrase",
    "dropped: clip in no blanked file",
    "dropped: the clip is an unavailable video",
    "annotators left with no answer",
    "clips written",
    "clips left out: unavailable video",
    "clips left out: no answers",
)


@dataclass(frozen=True)
class Submission:
    """One annotator's answers to one clip, in their order, and where they were read."""

    source: str
    clip: ClipKey
    annotator: str
    answers: tuple[str, ...]


def _not_utf8(path: Path, data: bytes, error: UnicodeDecodeError) -> DataError:
    line = data.count(b"\n", 0, error.start) + 1
    column = error.start - data.rfind(b"\n", 0, error.start)
    return DataError(
        f"{path}, line {line}: byte {column} of the line (0x{data[error.start]:02x}) is not UTF-8; save the file as UTF-8"
    )


class CsvTable:
    """A UTF-8 CSV file read as rows of cells by column name, each with the line it starts on.

    A byte-order mark and Windows line ends are accepted; errors name the file and the line.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        data = path.read_bytes()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise _not_utf8(path, data, error) from error
        if "\0" in text:
            # NUL is valid UTF-8, but no text holds it: a UTF-16 file without its byte-order mark does.
            line = text.count("\n", 0, text.index("\0")) + 1
            raise DataError(f"{path}, line {line}: holds a NUL character (a UTF-16 file?); save the file as UTF-8 text")
        self._reader = csv.reader(io.StringIO(text, newline=""))
        self.columns = next(self._read_rows(), (0, []))[1]
        if not self.columns:
            raise DataError(f"{path}: empty, no header line")
        repeated = sorted({column for column in self.columns if self.columns.count(column) > 1})
        if repeated:
            raise DataError(f"{path}, line 1: the header names column {repeated[0]!r} twice (which one is meant?)")

    def _read_rows(self) -> Iterator[tuple[int, list[str]]]:
        """(first line, cells) of every non-blank row, header included."""
        while True:
            line = self._reader.line_num + 1
            try:
                cells = next(self._reader)
            except StopIteration:
                return
            except csv.Error as error:
                raise DataError(f"{self.path}, line {self._reader.line_num}: {error}") from error
            if cells:
                yield line, cells

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        """(first line, column -> cell) of the rows after the header; missing cells at a row's end read as ''."""
        for line, cells in self._read_rows():
            if len(cells) > len(self.columns):
                raise DataError(f"{self.path}, line {line}: {len(cells)} cells, but the header has {len(self.columns)}")
            yield line, dict(itertools.zip_longest(self.columns, cells, fillvalue=""))

    def require(self, columns: Iterable[str], layout: str) -> None:
        missing = [column for column in columns if column not in self.columns]
        if missing:
            raise DataError(f"{self.path}: the {layout} layout needs the columns {missing}, which are missing")

    def whole_seconds(self, row: dict[str, str], line: int, column: str) -> int:
        from fiberbench.records import whole_seconds

        try:
            return whole_seconds(row[column], text=True)
        except ValueError as error:
            raise DataError(f"{self.path}, line {line}, column {column!r}: {error}") from None


def _is_rejected(row: dict[str, str]) -> bool:
    return row.get("AssignmentStatus", "").strip() == "Rejected" or bool(row.get("RejectionTime", "").strip())


def _answer_columns(columns: list[str], pattern: re.Pattern) -> list[str]:
    """The answer columns, ordered by the rank in their names (so answer_10 comes after answer_9)."""
    ranked = [(int(match[1]), column) for column in columns if (match := pattern.fullmatch(column))]
    return [column for _, column in sorted(ranked)]


def _row_submissions(table: CsvTable, rows: Iterable[tuple[int, dict[str, str]]]) -> Iterator[Submission]:
    """The FIBER and one-clip-per-row Mechanical Turk layouts: one submission per row."""
    layout = "mturk" if "WorkerId" in table.columns else "fiber"
    annotator_column, id_columns, answer_pattern = LAYOUTS[layout]
    table.require((annotator_column, *id_columns), layout)
    answer_columns = _answer_columns(table.columns, answer_pattern)
    if not answer_columns:
        raise DataError(f"{table.path}: the {layout} layout needs answer columns matching {answer_pattern.pattern!r}")
    for line, row in rows:
        video_id = row[id_columns[0]].strip()
        start, end = (table.whole_seconds(row, line, column) for column in id_columns[1:])
        answers = tuple(filter(None, (row[column].strip() for column in answer_columns)))
        if answers and not row[annotator_column].strip():
            # Answers without an annotator would be merged with every other such row as one annotator.
            raise DataError(f"{table.path}, line {line}: field {annotator_column!r} is empty")
        yield Submission(f"{table.path}, line {line}", (video_id, start, end), row[annotator_column], answers)


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


def _task_submissions(table: CsvTable, rows: Iterable[tuple[int, dict[str, str]]]) -> Iterator[Submission]:
    """The release's task layout: one submission per clip of each row."""
    clips = sorted(int(match[1]) for column in table.columns if (match := TASK_CLIP_COLUMN.fullmatch(column)))
    inputs = {clip: {name: f"Input.{column}" for name, column in input_columns(clip).items()} for clip in clips}
    table.require(
        ["WorkerId", TASK_ANSWERS_COLUMN]
        + [columns[name] for columns in inputs.values() for name in ("video_start_time", "video_end_time")],
        "task",
    )
    if not clips:
        raise DataError(f"{table.path}: the task layout needs the clip columns Input.video1_id, Input.video2_id, ...")
    for line, row in rows:
        where = f"{table.path}, line {line}"
        if not row["WorkerId"].strip():
            raise DataError(f"{where}: field 'WorkerId' is empty")
        answers_by_clip = task_answers(row[TASK_ANSWERS_COLUMN], where, clips)
        for clip, columns in inputs.items():
            video_id = task_input_value(row[columns["video_id"]].strip())
            answers = tuple(filter(None, answers_by_clip.get(clip, [])))
            if not video_id:
                if answers:
                    raise DataError(
                        f"{where}, column {columns['video_id']!r}: empty, but Answer.taskAnswers answers clip {clip}"
                    )
                continue
            start, end = (table.whole_seconds(row, line, columns[name]) for name in ("video_start_time", "video_end_time"))
            yield Submission(where, (video_id, start, end), row["WorkerId"], answers)


def read_submissions(path: Path) -> Iterator[Submission]:
    """The submissions of an answers CSV in any layout of `CSV_LAYOUTS`, rejected assignments skipped."""
    table = CsvTable(path)
    rejected = Counter()

    def accepted_rows() -> Iterator[tuple[int, dict[str, str]]]:
        for line, row in table.rows():
            if _is_rejected(row):
                rejected["rows"] += 1
            else:
                yield line, row

    read = _task_submissions if TASK_ANSWERS_COLUMN in table.columns else _row_submissions
    yield from read(table, accepted_rows())
    if rejected:
        logger.info("%s: skipped %d rows of rejected assignments", path, rejected["rows"])


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
    from fiberbench.metric import normalize_answer

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


def merge_answers(
    records: list[dict], submissions: Iterable[Submission], nlp: "Language | None", batch_size: int = 256
) -> tuple[list[dict], Counter]:
    """The records that end up with answers, with `additional_answers` from the submissions, and the counts.

    `records` are validated release-format records, each clip once (see `check_unique_clips`). With
    a pipeline, the noun-phrase rule parses every answer in its blank's context, all in one
    `nlp.pipe`; with `nlp=None` every answer is kept. Annotators left with no answer are left out;
    `additional_answers` already in the records are replaced. Clips with an "unavailable video"
    answer and clips left with no answers are left out of the returned records. The counts hold
    every reason an answer or a clip was dropped: answers read = answers kept + the answers dropped.
    """
    counts = Counter(dict.fromkeys(COUNTS, 0))
    clips = _collect(records, submissions, counts)
    if nlp is None:
        del counts["dropped: not a noun phrase"]
        keep = itertools.repeat(True)
    else:
        from fiberbench.modeling.noun_phrases import are_noun_phrases

        masked_captions = [clip.masked_caption for clip in clips.values() for _ in clip.answers]
        answers = [answer for clip in clips.values() for _, answer in clip.answers]
        are_nps = are_noun_phrases(masked_captions, answers, nlp, batch_size)
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = CSV_LAYOUTS
    parser.add_argument(
        "--blanked_files",
        nargs="+",
        type=Path,
        required=True,
        help="Release-format files of blanked clips, e.g. val.json test.json (from `fiberbench blank`).",
    )
    parser.add_argument(
        "--answers_files",
        nargs="+",
        type=Path,
        required=True,
        help="Answers CSVs: Mechanical Turk results of the annotation page, or the other layouts below.",
    )
    add_output_arguments(
        parser,
        "Each blanked file is written here under its own name, with additional_answers.",
        "Replace files in --output_dir that an earlier answers run wrote (never other files).",
        folder=True,
    )
    parser.add_argument(
        "--spacy_model",
        default=None,
        help="spaCy pipeline of the noun-phrase rule (default: $FIBERBENCH_SPACY_MODEL, else the paper's, "
        "en_core_web_trf, else an installed one).",
    )
    parser.add_argument("--batch_size", type=positive_int, default=256, help="Texts per nlp.pipe batch.")
    parser.add_argument(
        "--keep_non_noun_phrases",
        action="store_true",
        help="Skip the noun-phrase filter (for the 'before filtering' share of `fiberbench stats`).",
    )


def check_unique_clips(files: dict[Path, list[dict]]) -> None:
    """Answers are matched to clips by ids and times, so a clip in two places is an error naming both."""
    first_seen: dict[ClipKey, tuple[Path, int]] = {}
    for path, records in files.items():
        for index, record in enumerate(records):
            first_path, first_index = first_seen.setdefault(clip_key(record), (path, index))
            if (first_path, first_index) != (path, index):
                raise DataError(
                    f"{path}: record {index}: clip {clip_key(record)} is also record {first_index} of {first_path}"
                )


def run(args: argparse.Namespace) -> int:
    from fiberbench.records import read_release_records

    check_input_files([*args.blanked_files, *args.answers_files])
    if len({path.name for path in args.blanked_files}) != len(args.blanked_files):
        raise UsageError(f"--blanked_files must have different names, got {[str(path) for path in args.blanked_files]}")
    outputs = [
        Output(
            args.output_dir / path.name,
            command="fiberbench answers",
            flag="--output_dir",
            overwrite=args.overwrite_output_dir,
            overwrite_flag="--overwrite_output_dir",
        )
        for path in args.blanked_files
    ]
    with open_all(outputs, [*args.blanked_files, *args.answers_files], **arguments_of(args)):
        files = {path: read_release_records(path) for path in args.blanked_files}
        check_unique_clips(files)
        # Every answers file is read and checked before the (slow) pipeline loads.
        submissions = [submission for path in args.answers_files for submission in read_submissions(path)]
        if args.keep_non_noun_phrases:
            nlp = None
        else:
            with collector_held_off():
                from fiberbench.modeling.noun_phrases import load_spacy_pipeline

                nlp = load_spacy_pipeline(args.spacy_model)
        all_records = [record for records in files.values() for record in records]
        merged, counts = merge_answers(all_records, submissions, nlp, args.batch_size)
        kept = {clip_key(record): record for record in merged}
        for output, records in zip(outputs, files.values()):
            written = write_json_records(output.path, (kept[key] for key in map(clip_key, records) if key in kept))
            logger.info("Wrote %s (%d of its %d clips)", output.path, written, len(records))
    for reason, count in counts.items():
        logger.info("%s: %d", reason, count)
    return 0
