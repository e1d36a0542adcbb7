"""`fiberbench hit-inputs`: the input CSV of the crowd tasks that collect answers for blanked clips (§3.2).

As in the paper, each task (a Mechanical Turk HIT) shows several clips, five by default; one row of
the CSV is one task, with the columns that the annotation page (`fiberbench.data.annotation`) reads.
Clips go into tasks in the order of the blanked file; the last task holds what remains, its other
cells empty.
"""

import argparse
import csv
import logging
from pathlib import Path

from fiberbench.cli import add_output_arguments, positive_int
from fiberbench.errors import DataError
from fiberbench.files import atomic_path, write_text
from fiberbench.ownership import Output, arguments_of, open_all

from .annotation import CLIPS_PER_TASK, PAGE_PATH, annotation_page, input_columns, preview_url, task_input_cell

logger = logging.getLogger(__name__)


def task_columns(questions_per_hit: int) -> list[str]:
    """The CSV's columns: the inputs of clip 1, then of clip 2, and so on."""
    return [column for clip in range(1, questions_per_hit + 1) for column in input_columns(clip).values()]


def task_rows(records: list[dict], questions_per_hit: int) -> list[dict[str, str]]:
    """One row per task, `questions_per_hit` clips each in the records' order.

    Each cell is written by `task_input_cell`: HTML-escaped, as the release escaped its captions
    (Mechanical Turk pastes the values into the page as they are, where a quote or a `<` would
    break it), and never a formula for a spreadsheet that opens the CSV.
    """
    rows = []
    for first in range(0, len(records), questions_per_hit):
        row = dict.fromkeys(task_columns(questions_per_hit), "")
        for clip, record in enumerate(records[first : first + questions_per_hit], start=1):
            columns = input_columns(clip)
            for field, column in columns.items():
                row[column] = task_input_cell(str(record[field]))
        rows.append(row)
    return rows


def write_task_csv(path: Path, rows: list[dict[str, str]], columns: list[str]) -> None:
    """Write the task rows as a UTF-8 CSV, atomically."""
    with atomic_path(path) as temporary, temporary.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, columns)
        writer.writeheader()
        writer.writerows(rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("blanked_file", type=Path, help="Blanked clips in the release format (`fiberbench blank`).")
    parser.add_argument(
        "--questions_per_hit",
        type=positive_int,
        default=CLIPS_PER_TASK,
        help=f"Clips per task (default {CLIPS_PER_TASK}, as in the paper).",
    )
    add_output_arguments(
        parser,
        "The task input CSV to write.",
        "Replace an --output_file (and --page_file) that an earlier hit-inputs wrote.",
    )
    parser.add_argument(
        "--page_file",
        type=Path,
        default=None,
        help=f"Also write the annotation page with one slot per clip of a task (the shipped page, {PAGE_PATH.name}, "
        f"has {CLIPS_PER_TASK}).",
    )


def run(args: argparse.Namespace) -> int:
    from .answers import check_unique_clips
    from fiberbench.records import read_release_records

    flags = {"--output_file": args.output_file}
    if args.page_file is not None:
        flags["--page_file"] = args.page_file
    outputs = [
        Output(path, command="fiberbench hit-inputs", flag=flag, overwrite=args.overwrite_output_file)
        for flag, path in flags.items()
    ]
    with open_all(outputs, [args.blanked_file], **arguments_of(args)):
        records = read_release_records(args.blanked_file)
        if not records:
            raise DataError(f"{args.blanked_file}: holds no clips")
        check_unique_clips({args.blanked_file: records})
        rows = task_rows(records, args.questions_per_hit)
        write_task_csv(outputs[0].path, rows, task_columns(args.questions_per_hit))
        if args.page_file is not None:
            write_text(outputs[-1].path, annotation_page(args.questions_per_hit))
    remainder = len(records) % args.questions_per_hit or args.questions_per_hit
    logger.info(
        "Wrote %s: %d tasks of %d clips (%d clips; the last task holds %d)",
        args.output_file, len(rows), args.questions_per_hit, len(records), remainder,
    )
    page = PAGE_PATH
    if args.page_file is not None:
        page = args.page_file
        logger.info("Wrote %s, the annotation page for %d clips per task", page, args.questions_per_hit)
    elif args.questions_per_hit != CLIPS_PER_TASK:
        logger.warning(
            "The shipped annotation page shows %d clips per task: write one for %d with --page_file",
            CLIPS_PER_TASK, args.questions_per_hit,
        )
    logger.info("Preview the first task in a browser: %s", preview_url(rows[0], page))
    return 0
