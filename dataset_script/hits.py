"""`fiberbench hit-inputs`: the input CSV of the crowd tasks (§3.2), one row per task of several clips (five by
default) in the blanked file's order; each cell HTML, as Mechanical Turk pastes it, and never a spreadsheet formula.
"""

import argparse
import contextlib
import csv
import logging
from pathlib import Path

from fiberbench.cli import add_output_arguments, arguments_of, positive_int
from fiberbench.errors import DataError, UsageError
from fiberbench.outputs import (atomic_path, check_output, finish_output, output_lock, record_path, start_output,
                                write_text)
from fiberbench.records import read_release_records

from .annotation import CLIPS_PER_TASK, PAGE_PATH, annotation_page, input_columns, preview_url, task_input_cell
from .crowd import check_unique_clips

logger = logging.getLogger(__name__)

COMMAND = "fiberbench hit-inputs"


def task_columns(questions_per_hit: int) -> list[str]:
    """The CSV's columns: the inputs of clip 1, then of clip 2, and so on."""
    return [column for clip in range(1, questions_per_hit + 1) for column in input_columns(clip).values()]


def task_rows(records: list[dict], questions_per_hit: int) -> list[dict[str, str]]:
    """One row per task, `questions_per_hit` clips each in the records' order, each cell by `task_input_cell`."""
    rows = []
    for first in range(0, len(records), questions_per_hit):
        rows.append(dict.fromkeys(task_columns(questions_per_hit), ""))
        for clip, record in enumerate(records[first : first + questions_per_hit], start=1):
            rows[-1] |= {column: task_input_cell(str(record[field])) for field, column in input_columns(clip).items()}
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("blanked_file", type=Path, help="Blanked clips in the release format (`fiberbench blank`).")
    parser.add_argument("--questions_per_hit", type=positive_int, default=CLIPS_PER_TASK, help="Clips per task.")
    add_output_arguments(parser, "The task input CSV to write.",
                         "Replace what hit-inputs wrote there (and --page_file).")
    parser.add_argument("--page_file", type=Path, help="Also write the annotation page with one slot per clip of a "
                        f"task (the shipped page, {PAGE_PATH.name}, has {CLIPS_PER_TASK}).")


def run(args: argparse.Namespace) -> int:
    outputs = {"--output_file": args.output_file}
    if args.page_file is not None:
        if record_path(args.page_file.resolve(), False) == record_path(args.output_file.resolve(), False):
            raise UsageError(f"--output_file {args.output_file} and --page_file {args.page_file} would share one "
                             "record (or are one file): give the page another name")
        outputs["--page_file"] = args.page_file
    with contextlib.ExitStack() as stack:
        for flag, path in outputs.items():
            stack.enter_context(output_lock(path, flag))
            check_output(path, command=COMMAND, flag=flag, overwrite=args.overwrite_output_file,
                         inputs=[args.blanked_file])
        records = read_release_records(args.blanked_file)
        if not records:
            raise DataError(f"{args.blanked_file}: holds no clips")
        check_unique_clips({args.blanked_file: records})
        rows = task_rows(records, args.questions_per_hit)
        written = {path: start_output(path, COMMAND, None, folder=False, arguments=arguments_of(args))
                   for path in outputs.values()}
        with atomic_path(args.output_file) as temporary, temporary.open("w", newline="", encoding="utf-8") as file:
            writer = csv.DictWriter(file, task_columns(args.questions_per_hit))
            writer.writeheader()
            writer.writerows(rows)
        if args.page_file is not None:
            write_text(args.page_file, annotation_page(args.questions_per_hit))
        for path, record in written.items():
            finish_output(path, record)
    remainder = len(records) % args.questions_per_hit or args.questions_per_hit
    logger.info("Wrote %s: %d tasks of %d clips (%d clips; the last task holds %d)", args.output_file, len(rows),
                args.questions_per_hit, len(records), remainder)
    if args.page_file is not None:
        logger.info("Wrote %s, the annotation page for %d clips per task", args.page_file, args.questions_per_hit)
    elif args.questions_per_hit != CLIPS_PER_TASK:
        logger.warning("The shipped annotation page shows %d clips per task: write one for %d with --page_file",
                       CLIPS_PER_TASK, args.questions_per_hit)
    logger.info("Preview the first task in a browser: %s", preview_url(rows[0], args.page_file or PAGE_PATH))
    return 0
