"""What the board page shows: the table, the paper's rows, the pairwise matrix and the by-category chart.

Each is made from a computed board (`board.compute_board`) and nothing else: the numbers are
`fiberbench evaluate`'s, rounded for display. Names are shown as text: the table holds plain
strings, and the matrix's HTML escapes every name.
"""

import html

from fiberbench.metric.scoring.figure import category_figure
from fiberbench.metric.scoring.report import leaderboard_rows

from fiberbench.leaderboard.ranks import rank_text

# The paper's Table 3 (EM, F1 in percent) by split: shown as reported, with no interval and no rank.
PAPER_TABLE_3 = {
    "most frequent answer": {"validation": (15.4, 45.1), "test": (16.4, 45.3)},
    "T5 zero-shot": {"validation": (39.3, 52.0), "test": (37.4, 49.2)},
    "T5 fine-tuned": {"validation": (58.0, 73.8), "test": (54.5, 70.9)},
    "T5 + 1f I3D": {"validation": (59.2, 74.7), "test": (54.3, 70.5)},
    "T5 + I3D": {"validation": (60.2, 75.0), "test": (56.2, 71.4)},
    "late fusion T5 + 1f I3D": {"validation": (53.7, 70.3), "test": (50.3, 67.6)},
    "late fusion T5 + I3D": {"validation": (53.5, 69.7), "test": (51.6, 67.8)},
    "human, leave one worker out": {"validation": (75.3, 82.6), "test": (75.0, 82.5)},
}
REPORTED = "reported in the paper"

METADATA_COLUMNS = {
    "kind": "kind",
    "video_input": "video input",
    "frames": "frames",
    "answer_reading": "answer reading",
    "date": "date",
    "link": "link",
}
SCORE_COLUMNS = ["F1", "F1 interval", "EM", "EM interval", "F1, label only", "EM, label only", "Correct@1", "MAP"]
COLUMNS = ["rank", "rank interval", "system", *SCORE_COLUMNS, "blanks", *METADATA_COLUMNS.values()]
# Pixels: the scores narrow, the system and the texts wide enough to read without scrolling far.
COLUMN_WIDTHS = [60, 70, 200] + [60, 110] * 2 + [70] * 5 + [80, 120, 60, 140, 100, 160]
DATATYPES = ["str", "str", "str"] + ["number", "str"] * 2 + ["number"] * 5 + ["str", "str", "number", "str", "str", "str"]


def _value(row: dict, name: str, key: str | None = None) -> float | None:
    value = row.get(name)
    if key is not None:
        value = (value or {}).get(key)
    return None if value is None else round(value, 1)


def _interval(row: dict, name: str) -> str:
    low, high = row["confidence_intervals"][name]
    return f"[{low:.1f}, {high:.1f}]"


def table_rows(board: dict) -> list[list]:
    """The board's table, best F1 first: a row per system (rank, rank interval, scores, how it was run) and per
    baseline (no rank)."""
    results = board["results"]
    num_blanks = results["dataset"]["num_blanks"]
    rows, rank = [], 0
    for name, row in leaderboard_rows(results).items():
        metadata = board["metadata"].get(name)
        if metadata is not None:
            rank += 1
            ranks = (str(rank), rank_text(board["rank_intervals"][name]))
            blanks = num_blanks
        else:
            ranks = ("baseline", "")
            blanks = row.get("num_blanks", num_blanks)
        scores = [
            _value(row, "f1"),
            _interval(row, "f1"),
            _value(row, "exact_match"),
            _interval(row, "exact_match"),
            _value(row, "f1_label_only"),
            _value(row, "exact_match_label_only"),
            _value(row, "correct_at_k", "1"),
            _value(row, "map"),
        ]
        how = [(metadata or {}).get(field) for field in METADATA_COLUMNS]
        rows.append([*ranks, name, *scores, blanks, *how])
    return rows


def sorted_rows(rows: list[list], column: str) -> list[list]:
    """The table's rows sorted by `column`: numbers highest first, texts in alphabetical order, empty cells last.

    Sorting by "rank" or "rank interval" keeps the board's order (best F1 first, the baselines where their F1 puts
    them); ties keep it too.
    """
    if column in ("rank", "rank interval"):
        return rows
    index = COLUMNS.index(column)
    numeric = DATATYPES[index] == "number"
    filled = [row for row in rows if row[index] not in (None, "")]
    empty = [row for row in rows if row[index] in (None, "")]
    if numeric:
        return sorted(filled, key=lambda row: -row[index]) + empty
    return sorted(filled, key=lambda row: str(row[index]).casefold()) + empty


def paper_rows(split: str) -> list[list]:
    """The paper's Table 3 for `split` (none for a split the paper does not report): method, EM, F1."""
    return [[method, *by_split[split], REPORTED] for method, by_split in PAPER_TABLE_3.items() if split in by_split]


def pairwise_html(board: dict, metric: str) -> str:
    """The matrix of paired differences (row - column) on `metric`, each with its Holm-corrected p-value.

    Bold where the corrected p is below 0.05: the lead is unlikely to be luck of the blanks.
    """
    results = board["results"]
    names = [name for name in leaderboard_rows(results) if name in board["metadata"]]
    cells = {}
    for comparison, adjusted in zip(results["comparisons"], board["holm_p_values"]):
        if comparison["metric"] != metric:
            continue
        a, b = comparison["systems"]
        cells[a, b] = (comparison["difference"], comparison["p_value"], adjusted)
        cells[b, a] = (0.0 - comparison["difference"], comparison["p_value"], adjusted)  # never "-0.0"
    header = "".join(f"<th>{html.escape(name)}</th>" for name in names)
    lines = [f"<table class='pairwise'><tr><th>row - column</th>{header}</tr>"]
    for row in names:
        tds = []
        for column in names:
            if row == column:
                tds.append("<td>–</td>")
                continue
            difference, p_value, adjusted = cells[row, column]
            text = f"{difference:+.1f} (p {p_value:.2g}, Holm {adjusted:.2g})"
            tds.append(f"<td><b>{text}</b></td>" if adjusted < 0.05 else f"<td>{text}</td>")
        lines.append(f"<tr><th>{html.escape(row)}</th>{''.join(tds)}</tr>")
    lines.append("</table>")
    return "".join(lines)


def category_chart(board: dict, chosen: list[str]):
    """`fiberbench evaluate`'s by-category figure for the `chosen` systems and the baselines (None without categories)."""
    results = board["results"]
    systems = {name: row for name, row in results["systems"].items() if name in chosen}
    if not all("by_category" in row for row in [*systems.values(), *results.get("baselines", {}).values()]):
        return None
    return category_figure({**results, "systems": systems})
