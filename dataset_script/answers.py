"""`fiberbench answers`: merge crowd answers into the release format's `additional_answers`.

As in the paper (§3.2), each annotator's order is kept, an annotator's repeats after
normalization are dropped, and only answers that are noun phrases in the blank's context are kept.
The CSV layouts read are described in `CSV_LAYOUTS` (also shown by `fiberbench answers --help`).
"""

import argparse
import csv
import itertools
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from spacy.language import Language

from fiberbench.metric import normalize_answer
from fiberbench.modeling.noun_phrases import DEFAULT_PIPELINE, are_noun_phrases, load_spacy_pipeline

from .json_records import read_records_with_fields, write_json_records

logger = logging.getLogger(__name__)

ClipKey = tuple[str, int, int]

CSV_LAYOUTS = """\
Answers CSVs have one row per (clip, annotator), in one of two layouts:

- FIBER's: columns video_id, video_start_time, video_end_time, annotator_id, and one column per
  answer, answer_1, answer_2, ... in the annotator's order, most natural first (blank cells are
  ignored, so rows may hold different numbers of answers).
- A Mechanical Turk batch results export: WorkerId, the HIT's input columns Input.video_id,
  Input.video_start_time, Input.video_end_time, and one Answer.<name><n> column per answer, n its
  rank (Answer.answer1, Answer.answer2, ...). Rows whose AssignmentStatus is Rejected are skipped.
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


@dataclass(frozen=True)
class Submission:
    """One annotator's answers to one clip, in their order, and where they were read."""

    source: str
    clip: ClipKey
    annotator: str
    answers: tuple[str, ...]


def _answer_columns(columns: list[str], pattern: re.Pattern) -> list[str]:
    """The answer columns, ordered by the rank in their names (so answer_10 comes after answer_9)."""
    ranked = [(int(match[1]), column) for column in columns if (match := pattern.fullmatch(column))]
    return [column for _, column in sorted(ranked)]


def read_submissions(path: Path) -> Iterator[Submission]:
    """The rows of an answers CSV in either layout of `CSV_LAYOUTS`, rejected assignments skipped."""
    with path.open(newline="", encoding="utf-8-sig") as file:
        reader = csv.DictReader(file)
        columns = reader.fieldnames or []
        layout = "mturk" if "WorkerId" in columns else "fiber"
        annotator_column, id_columns, answer_pattern = LAYOUTS[layout]
        missing = [column for column in (annotator_column, *id_columns) if column not in columns]
        answer_columns = _answer_columns(columns, answer_pattern)
        if missing or not answer_columns:
            raise ValueError(
                f"{path}: the {layout} layout needs the columns {[annotator_column, *id_columns]} and answer "
                f"columns matching {answer_pattern.pattern!r}; missing: {missing or 'the answer columns'}"
            )
        rejected = 0
        for row in reader:
            if row.get("AssignmentStatus") == "Rejected":
                rejected += 1
                continue
            source = f"{path}, line {reader.line_num}"
            video_id, start, end = ((row[column] or "").strip() for column in id_columns)
            for column, value in zip(id_columns[1:], (start, end)):
                if not value.isdigit():
                    raise ValueError(f"{source}: column {column!r} must hold whole seconds, got {value!r}")
            answers = ((row[column] or "").strip() for column in answer_columns)
            yield Submission(
                source, (video_id, int(start), int(end)), row[annotator_column], tuple(filter(None, answers))
            )
    if rejected:
        logger.info("%s: skipped %d rows of rejected assignments", path, rejected)


@dataclass
class ClipAnswers:
    """One clip's answers so far, in reading order, and its annotators in first-seen order."""

    masked_caption: str
    annotators: dict[str, None] = field(default_factory=dict)  # an ordered set
    answers: list[tuple[str, str]] = field(default_factory=list)  # (annotator, answer)
    seen: set[tuple[str, str]] = field(default_factory=set)  # (annotator, normalized answer)


def clip_key(record: dict) -> ClipKey:
    """The (video_id, video_start_time, video_end_time) of a release-format record."""
    return record["video_id"], record["video_start_time"], record["video_end_time"]


def merge_answers(
    records: list[dict], submissions: Iterable[Submission], nlp: Language | None, batch_size: int = 256
) -> tuple[list[dict], Counter]:
    """The records with `additional_answers` from the submissions, and the counts of what was kept and dropped.

    With a pipeline, the noun-phrase rule parses every answer in its blank's context, all in one
    `nlp.pipe`; with `nlp=None` every answer is kept. Annotators left with no answer are left out;
    `additional_answers` already in the records are replaced.
    """
    clips = {clip_key(record): ClipAnswers(record["masked_caption"]) for record in records}
    if len(clips) != len(records):
        duplicates = [key for key, count in Counter(map(clip_key, records)).items() if count > 1]
        raise ValueError(f"Clips appear more than once in the blanked files: {duplicates}")
    counts = Counter()
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
            if not normalized:
                counts["dropped: empty after normalization"] += 1
            elif (submission.annotator, normalized) in clip.seen:
                counts["dropped: repeated by the same annotator"] += 1
            else:
                clip.seen.add((submission.annotator, normalized))
                clip.answers.append((submission.annotator, answer))

    if nlp is None:
        keep = itertools.repeat(True)
    else:
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
        merged.append({**record, "additional_answers": additional_answers})
        counts["answers kept"] += sum(map(len, additional_answers))
        counts["annotators left with no answer"] += len(by_annotator) - len(additional_answers)
        counts["clips with no answers"] += not additional_answers
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
        help="Answers CSVs, in FIBER's layout or as Mechanical Turk batch results (see below).",
    )
    parser.add_argument(
        "--output_dir",
        type=Path,
        required=True,
        help="Each blanked file is written here under its own name, with additional_answers.",
    )
    parser.add_argument("--spacy_model", default=DEFAULT_PIPELINE, help="spaCy pipeline of the noun-phrase rule.")
    parser.add_argument("--batch_size", type=int, default=256, help="Texts per nlp.pipe batch.")
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
                raise ValueError(
                    f"{path}: record {index}: clip {clip_key(record)} is also record {first_index} of {first_path}"
                )


def run(args: argparse.Namespace) -> int:
    fields = ("video_id", "video_start_time", "video_end_time", "masked_caption")
    files = {path: read_records_with_fields(path, fields) for path in args.blanked_files}
    outputs = [args.output_dir / path.name for path in files]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"--blanked_files must have different names, got {[str(path) for path in files]}")
    check_unique_clips(files)
    submissions = (submission for path in args.answers_files for submission in read_submissions(path))
    nlp = None if args.keep_non_noun_phrases else load_spacy_pipeline(args.spacy_model)
    all_records = [record for records in files.values() for record in records]
    merged, counts = merge_answers(all_records, submissions, nlp, args.batch_size)
    merged = iter(merged)
    for output, records in zip(outputs, files.values()):
        write_json_records(output, itertools.islice(merged, len(records)))
        logger.info("Wrote %s (%d clips)", output, len(records))
    for reason, count in counts.items():
        logger.info("%s: %d", reason, count)
    return 0
