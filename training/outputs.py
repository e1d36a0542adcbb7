"""Result files of a run and the results table printed at its end."""

import json
from pathlib import Path

RESULTS_FILE = "results.json"
PREDICTIONS_FILE = "predictions.jsonl"


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


TABLE_COLUMNS = (
    ("EM", "exact_match"),
    ("F1", "f1"),
    ("EM label", "exact_match_label_only"),
    ("F1 label", "f1_label_only"),
    ("C@1", ("correct_at_k", "1")),
    ("MAP", "map"),
    ("P(label)", "label_probability"),
)


def _cell(metrics: dict, key: str | tuple[str, str]) -> str:
    value = metrics.get(key[0], {}).get(key[1]) if isinstance(key, tuple) else metrics.get(key)
    if value is None:
        return "-"
    return f"{value:.3f}" if key == "label_probability" else f"{value:.1f}"


def format_results_table(title: str, splits: dict[str, dict]) -> str:
    """A Markdown table with one row per evaluated split (EM/F1 in %, P(label) in 0-1)."""
    header = ["split", "n"] + [name for name, _ in TABLE_COLUMNS]
    rows = [
        [split, str(metrics["num_examples"])] + [_cell(metrics, key) for _, key in TABLE_COLUMNS]
        for split, metrics in splits.items()
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = [title, "| " + " | ".join(cell.ljust(width) for cell, width in zip(header, widths)) + " |"]
    lines.append("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    lines += ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)
