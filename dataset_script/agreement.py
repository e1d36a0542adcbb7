"""`fiberbench agreement`: human agreement (the paper's Table 2) of a release-format file or of crowd answers.

The metric's `human_agreement` computes it as the release did; the crowd answers of `--answers_files` carry the
annotator ids that the paper's per-answer deviation (across annotators) needs.
"""

import argparse
import contextlib
import logging
from pathlib import Path

from fiberbench.cli import add_output_arguments, arguments_of
from fiberbench.errors import DataError, UsageError
from fiberbench.metric import human_agreement
from fiberbench.outputs import check_output, finish_output, output_lock, start_output, write_json
from fiberbench.records import InvalidRecordError, clip_key, read_release_records

from .annotation import is_unavailable_video
from .crowd import check_unique_clips, read_submissions
from .provenance import sample_file_name, synthetic_file_notice

logger = logging.getLogger(__name__)

COMMAND = "fiberbench agreement"
# Table 2 of the paper, F1 and EM (mean, std) in %. Its "per answer" row says "first answers", but
# the release computed it over every answer of every annotator and the labels.
PAPER_TABLE_2 = {
    "first_answers_per_caption": ((82.6, 15.7), (75.3, 19.7)),
    "all_answers_per_answer": ((70.0, 11.9), (58.1, 16.3)),
}


def crowd_answers(records: list[dict], answers_files: list[Path]) -> tuple[list, list]:
    """Each record's answers by annotator and its annotators' ids, from answers CSVs, before the noun-phrase filter
    (as the release's analysis); a clip an answer calls an unavailable video has none (`answers` leaves it out too)."""
    by_clip = {clip_key(record): {} for record in records}  # clip -> annotator id -> answers
    skipped = unavailable = 0
    for submission in (submission for path in answers_files for submission in read_submissions(path)):
        if submission.clip in by_clip:
            by_clip[submission.clip].setdefault(submission.annotator, []).extend(submission.answers)
        else:
            skipped += 1
    for clip, annotators in by_clip.items():
        if any(map(is_unavailable_video, sum(annotators.values(), []))):
            by_clip[clip], unavailable = {}, unavailable + 1
    logger.info("Skipped %d answer rows of clips not in the file; left out %d unavailable videos", skipped, unavailable)
    without_answers = sum(not annotators for annotators in by_clip.values())
    if without_answers == len(by_clip):
        raise DataError(f"No row of {', '.join(map(str, answers_files))} answers a clip of the blanked file")
    if without_answers:
        logger.info("%d of %d clips have no answers in the CSVs (no annotator to score)", without_answers, len(by_clip))
    return [list(annotators.values()) for annotators in by_clip.values()], [list(a) for a in by_clip.values()]


def agreement_of_file(path: Path, answers_files: list[Path] | None = None) -> dict:
    """`human_agreement` of a release-format file: of its `additional_answers`, or of the crowd answers of CSVs."""
    records = read_release_records(path)
    if answers_files:
        check_unique_clips({path: records})  # answers are matched to clips by ids and times
        additional_answers, annotator_ids = crowd_answers(records, answers_files)
    else:
        for index, record in enumerate(records):
            if not record["additional_answers"]:
                problem = "missing or empty: agreement needs annotators' answers"
                raise InvalidRecordError(str(path), index, "additional_answers", problem)
        additional_answers, annotator_ids = [record["additional_answers"] for record in records], None
    return human_agreement([record["label"] for record in records], additional_answers, annotator_ids)


def agreement_table(results: dict, sample_file: str | None = None) -> str:
    """Table 2 as Markdown: F1 and EM with their standard deviations, beside the paper's values; headed SYNTHETIC when
    the file is the bundled sample's `sample_file`."""
    with_ids = "all_answers_per_answer_f1_std_across_annotators" in results
    per_answer = "_std_across_annotators" if with_ids else "_std_across_answers"
    rows = {"first answers, per caption": ("first_answers_per_caption", "_std"),
            "all answers, per answer": ("all_answers_per_answer", per_answer)}
    lines = [synthetic_file_notice(sample_file), ""] if sample_file is not None else []
    lines += ["| Table 2 | F1 (%) | EM (%) | paper F1 | paper EM |", "|---|---|---|---|---|"]
    for title, (prefix, deviation) in rows.items():
        cells = [f"{results[f'{prefix}_{metric}']:.1f} (± {results[f'{prefix}_{metric}{deviation}']:.1f})"
                 for metric in ("f1", "exact_match")]
        paper = [f"{mean} (± {std})" for mean, std in PAPER_TABLE_2[prefix]]
        lines.append(f"| {title} | {' | '.join(cells + paper)} |")
    counts = [f"{value} {key[4:].replace('_', ' ')}" for key, value in results.items() if key.startswith("num_")]
    if with_ids:
        deviation = "the per-answer deviation is across annotators (each annotator's mean), as in the paper"
    else:
        deviation = ("the per-answer deviation is across answers: this file has no annotator ids, and the paper's "
                     "deviation across annotators needs them (pass the crowd answers with --answers_files)")
    notes = f"Leave one annotator out, the label counting as one more annotator; {', '.join(counts)}; {deviation}."
    return "\n".join(lines) + f"\n\n{notes}\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="Release-format JSON / JSON Lines file (e.g. val.json).")
    parser.add_argument("--answers_files", nargs="+", type=Path, help="Crowd answers CSVs with annotator ids (the "
                        "layouts of `fiberbench answers`), joined to FILE's clips by video_id and times; they replace "
                        "FILE's additional_answers and give the deviation across annotators.")
    add_output_arguments(parser, "Also write the numbers here as JSON.", "Replace what agreement wrote.",
                         required=False)


def run(args: argparse.Namespace) -> int:
    if args.overwrite_output_file and not args.output_file:
        raise UsageError("--overwrite_output_file needs --output_file")
    with output_lock(args.output_file, "--output_file") if args.output_file else contextlib.nullcontext():
        if args.output_file:
            check_output(args.output_file, command=COMMAND, flag="--output_file", overwrite=args.overwrite_output_file,
                         inputs=[args.file, *(args.answers_files or [])])
        results = agreement_of_file(args.file, args.answers_files)
        sample_file = sample_file_name(args.file, "Human agreement")
        results["synthetic"] = sample_file is not None
        print(agreement_table(results, sample_file))
        if args.output_file:
            record = start_output(args.output_file, COMMAND, None, folder=False, arguments=arguments_of(args))
            write_json(args.output_file, results)
            finish_output(args.output_file, record)
            logger.info("Wrote %s", args.output_file)
    return 0
