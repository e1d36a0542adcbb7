"""`fiberbench answers`: merge crowd answers into the release format's `additional_answers` (the paper's §3.2)."""

import argparse
import itertools
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fiberbench.cli import add_output_arguments, arguments_of, positive_int
from fiberbench.errors import UsageError
from fiberbench.json_records import write_json_records
from fiberbench.metric import normalize_answer
from fiberbench.modeling.noun_phrases import are_noun_phrases, load_spacy_pipeline
from fiberbench.outputs import check_output, finish_output, output_lock, start_output
from fiberbench.records import ClipKey, clip_key, read_release_records

from .annotation import is_unavailable_video
from .crowd import CSV_LAYOUTS, Submission, check_unique_clips, read_submissions

logger = logging.getLogger(__name__)

COMMAND = "fiberbench answers"
# What `merge_answers` counts, in the order it is logged: every answer read is kept or dropped for one reason, and
# every clip is written or left out for one reason.
COUNTS = (
    "answers read", "answers kept", "dropped: empty after normalization", "dropped: repeated by the same annotator",
    "dropped: not a noun phrase", "dropped: clip in no blanked file", "dropped: the clip is an unavailable video",
    "annotators left with no answer", "clips written", "clips left out: unavailable video",
    "clips left out: no answers",
)


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
    """The `records` (each clip once) left with answers, their `additional_answers` the submissions' that are noun
    phrases in their blank (all with `nlp=None`); every drop counted: answers read = answers kept + answers dropped."""
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = CSV_LAYOUTS
    parser.add_argument("--blanked_files", nargs="+", type=Path, required=True, help="Blanked release-format files.")
    parser.add_argument("--answers_files", nargs="+", type=Path, required=True, help="Answers CSVs (layouts below).")
    add_output_arguments(parser, "Each blanked file is written here under its own name, with additional_answers.",
                         "Replace files in --output_dir that an earlier answers run wrote (never other files).",
                         folder=True)
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
            check_output(output, command=COMMAND, flag="--output_dir", overwrite=args.overwrite_output_dir,
                         inputs=inputs)
        files = {path: read_release_records(path) for path in args.blanked_files}
        check_unique_clips(files)
        # Every answers file is read and checked before the (slow) pipeline loads.
        submissions = [submission for path in args.answers_files for submission in read_submissions(path)]
        nlp = None if args.keep_non_noun_phrases else load_spacy_pipeline(args.spacy_model)
        merged, counts = merge_answers(sum(files.values(), []), submissions, nlp, args.batch_size)
        kept = {clip_key(record): record for record in merged}
        for output, records in zip(outputs, files.values()):
            record = start_output(output, COMMAND, None, folder=False, arguments=arguments_of(args))
            written = write_json_records(output, (kept[key] for key in map(clip_key, records) if key in kept))
            finish_output(output, record)
            logger.info("Wrote %s (%d of its %d clips)", output, written, len(records))
    for reason, count in counts.items():
        logger.info("%s: %d", reason, count)
    return 0
