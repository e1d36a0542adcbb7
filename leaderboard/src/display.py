"""What the board page shows: its texts, the table, the paper's rows, the pairwise matrix and the by-category chart.

Each is made from a computed board (`populate.compute_board`) and nothing else: the numbers are `fiberbench
evaluate`'s, rounded for display. Names are shown as text: the table holds plain strings, the matrix escapes them.
"""

import html

from fiberbench.metric.evaluate.report import category_figure, leaderboard_rows

# The paper's Table 3 (EM, F1 in percent) by split: shown as reported, with no interval and never ranked.
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
RANKS_TEXT = (
    "**Rank** orders the systems by F1. **Rank interval**: the ranks a system takes across the same paired bootstrap "
    "resamples of the blanks (every system scored on the same resampled blanks); two systems whose rank intervals "
    "overlap may be in either order on other blanks like these. Baselines and the paper's rows are not ranked."
)
PAIRWISE_TEXT = (
    "**Pairwise comparisons**: row - column on the same blanks, with the two-sided p-value of approximate "
    "randomization (as `fiberbench evaluate` gives it) and that p-value after **Holm's correction** for the number "
    "of pairs compared (which keeps the chance of any false difference among them at 5%). **Bold**: Holm-corrected "
    "p below 0.05, a difference unlikely to be luck of the blanks."
)
METADATA_COLUMNS = {"kind": "kind", "video_input": "video input", "frames": "frames",
                    "answer_reading": "answer reading", "date": "date", "link": "link"}
SCORE_COLUMNS = ["F1", "F1 interval", "EM", "EM interval", "F1, label only", "EM, label only", "Correct@1", "MAP"]
COLUMNS = ["rank", "rank interval", "system", *SCORE_COLUMNS, "blanks", *METADATA_COLUMNS.values()]
# Pixels: the scores narrow, the system and the texts wide enough to read without scrolling far.
COLUMN_WIDTHS = [60, 70, 200] + [60, 110] * 2 + [70] * 5 + [80, 120, 60, 140, 100, 160]
DATATYPES = ["str"] * 3 + ["number", "str"] * 2 + ["number"] * 5 + ["str", "str", "number", "str", "str", "str"]


def introduction(title: str, dataset: dict, settings: dict) -> str:
    """The page's heading: the split, how it is scored, and whether the data is SYNTHETIC."""
    synthetic = "\n\n**SYNTHETIC data**: the numbers say nothing about FIBER." * dataset["synthetic"]
    level = f"{100 * settings['confidence_level']:g}%"
    return (
        f"# {title}\n\nThe {dataset['split']} split of {dataset['name']} ({dataset['num_blanks']:,} blanks), scored by "
        f"`fiberbench evaluate`: EM and F1 in percent, each with its {level} confidence interval (percentile bootstrap "
        f"over the blanks, {settings['num_bootstrap']:,} resamples, seed {settings['seed']}).{synthetic}"
    )


def _value(row: dict, name: str, key: str | None = None) -> float | None:
    value = row.get(name)
    value = (value or {}).get(key) if key is not None else value
    return None if value is None else round(value, 1)


def table_rows(board: dict) -> list[list]:
    """The board's table, best F1 first: a row per system (rank, rank interval, scores, how it was run) and per
    baseline (no rank)."""
    results = board["results"]
    rows, rank = [], 0
    for name, row in leaderboard_rows(results).items():
        metadata = board["metadata"].get(name)
        if metadata is not None:
            rank += 1
            low, high = board["rank_intervals"][name]
            ranks = (str(rank), str(low) if low == high else f"{low}-{high}")
        else:
            ranks = ("baseline", "")
        intervals = {metric: "[{:.1f}, {:.1f}]".format(*row["confidence_intervals"][metric])
                     for metric in ("f1", "exact_match")}
        scores = [_value(row, "f1"), intervals["f1"], _value(row, "exact_match"), intervals["exact_match"],
                  _value(row, "f1_label_only"), _value(row, "exact_match_label_only"),
                  _value(row, "correct_at_k", "1"), _value(row, "map")]
        blanks = row.get("num_blanks", results["dataset"]["num_blanks"])
        rows.append([*ranks, name, *scores, blanks, *((metadata or {}).get(field) for field in METADATA_COLUMNS)])
    return rows


def sorted_rows(rows: list[list], column: str) -> list[list]:
    """The table's rows sorted by `column`: numbers highest first, texts in alphabetical order, empty cells last;
    "rank" and "rank interval" keep the board's order (best F1 first), and ties keep it too."""
    if column in ("rank", "rank interval"):
        return rows
    index = COLUMNS.index(column)
    filled = [row for row in rows if row[index] not in (None, "")]
    if DATATYPES[index] == "number":
        filled.sort(key=lambda row: -row[index])
    else:
        filled.sort(key=lambda row: str(row[index]).casefold())
    return filled + [row for row in rows if row[index] in (None, "")]


def paper_rows(split: str) -> list[list]:
    """The paper's Table 3 for `split` (none for a split the paper does not report): method, EM, F1, source."""
    return [[method, *by_split[split], REPORTED] for method, by_split in PAPER_TABLE_3.items() if split in by_split]


def pairwise_html(board: dict, metric: str) -> str:
    """The matrix of paired differences (row - column) on `metric`, each with its Holm-corrected p-value, bold where
    that is below 0.05."""
    names = [name for name in leaderboard_rows(board["results"]) if name in board["metadata"]]
    cells = {}
    for comparison, adjusted in zip(board["results"]["comparisons"], board["holm_p_values"]):
        if comparison["metric"] == metric:
            a, b = comparison["systems"]
            cells[a, b] = (comparison["difference"], comparison["p_value"], adjusted)
            cells[b, a] = (0.0 - comparison["difference"], comparison["p_value"], adjusted)  # never "-0.0"
    lines = ["<table class='pairwise'><tr><th>row - column</th>"
             + "".join(f"<th>{html.escape(name)}</th>" for name in names) + "</tr>"]
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
    return "".join(lines) + "</table>"


def category_chart(board: dict, chosen: list[str]):
    """evaluate's by-category figure of the `chosen` systems and the baselines (None without categories)."""
    results = board["results"]
    systems = {name: row for name, row in results["systems"].items() if name in chosen}
    if not all("by_category" in row for row in [*systems.values(), *results.get("baselines", {}).values()]):
        return None
    return category_figure({**results, "systems": systems})
