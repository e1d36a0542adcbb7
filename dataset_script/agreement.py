"""`fiberbench agreement`: human agreement (the paper's Table 2) of a release-format file.

The scores come from the metric's `human_agreement` (leave one annotator out, the label counting
as one more annotator); this command reads the file, prints the table and can save the numbers.
"""

import argparse
import logging
from pathlib import Path

from fiberbench.files import write_json
from fiberbench.metric import human_agreement

from .fiber.validation import InvalidRecordError, read_release_records

logger = logging.getLogger(__name__)

# Table 2 of the paper: first answers, F1 and EM, per caption and per answer (mean, std), in %.
PAPER_TABLE_2 = {
    ("first_answers", "per_caption"): ((82.6, 15.7), (75.3, 19.7)),
    ("first_answers", "per_answer"): ((70.0, 11.9), (58.1, 16.3)),
}


def agreement_of_file(path: Path) -> dict:
    """`human_agreement` of the records of a release-format file (label and additional_answers)."""
    records = read_release_records(path)
    for index, record in enumerate(records):
        if not record["additional_answers"]:
            raise InvalidRecordError(
                str(path), index, "additional_answers", "missing or empty: agreement needs annotators' answers"
            )
    try:
        return human_agreement(
            [record["label"] for record in records], [record["additional_answers"] for record in records]
        )
    except ValueError as error:  # the metric names the field and the record's index, not the file
        raise ValueError(f"{path}: {error}") from error


def agreement_table(results: dict) -> str:
    """Table 2 as Markdown: F1 and EM with their standard deviations, and the paper's values."""
    lines = [
        "| answers | averaged | F1 (%) | EM (%) | paper F1 | paper EM |",
        "|---|---|---|---|---|---|",
    ]
    for which in ("first_answers", "all_answers"):
        for level in ("per_caption", "per_answer"):
            prefix = f"{which}_{level}"
            cells = [
                f"{results[f'{prefix}_{metric}']:.1f} (± {results[f'{prefix}_{metric}_std']:.1f})"
                for metric in ("f1", "exact_match")
            ]
            paper = PAPER_TABLE_2.get((which, level))
            paper_cells = [f"{mean} (± {std})" for mean, std in paper] if paper else ["", ""]
            row = [which.split("_")[0], level.replace("_", " "), *cells, *paper_cells]
            lines.append("| " + " | ".join(row) + " |")
    counts = ", ".join(
        f"{results[key]} {key.removeprefix('num_').replace('_', ' ')}"
        for key in ("num_captions", "num_first_answers", "num_all_answers", "num_annotators_left_out")
    )
    return "\n".join(lines) + f"\n\nLeave one annotator out, the label counting as one more annotator; {counts}.\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="Release-format JSON / JSON Lines file with additional_answers.")
    parser.add_argument("--output_file", type=Path, help="Also write the numbers here as JSON.")


def run(args: argparse.Namespace) -> int:
    results = agreement_of_file(args.file)
    print(agreement_table(results))
    if args.output_file:
        write_json(args.output_file, results)
        logger.info("Wrote %s", args.output_file)
    return 0
