"""What the board page shows: its texts, the table and its filters, the paper's rows, the pairwise matrix and the chart.

Each is made from a computed board (`populate.Board`) and nothing else: the numbers are `fiberbench evaluate`'s,
rounded for display. Names are shown as text: the table holds plain strings, the matrix escapes them, the chart reads
no mathtext.
"""

import html

from fiberbench.metric.evaluate.report import category_figure, leaderboard_rows

# The paper's Table 3 (EM, F1 in percent) by split: shown as reported, with no interval and never ranked. Its models'
# F1 is the release's code's (`F1ScoreMany`: raw answers split on white space, not normalized); its human row's F1 is
# normalized, as here (`lqam/annotations/metrics.py`).
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
RELEASE_F1, NORMALIZED_F1 = "the release's model F1 (raw answers, not normalized)", "normalized F1, as scored here"
REPORTED = "reported in the paper"
F1_TEXT = (
    "**Which F1.** F1 here is the paper's text's: normalized answers (case, articles, punctuation), token sets. The "
    "paper's model rows are the F1 its released code computed for models, on raw answers split on white space; on "
    "data shaped like FIBER that F1 ran 1.7 to 3.5 points above the normalized one, EM identical, so they are not "
    "comparable point for point. The column \"F1, release's\" (where scored) puts a system on the paper's footing."
)
RANKS_TEXT = (
    "**Rank** orders the systems by F1. **Rank interval**: the middle 95% of the ranks a system takes across the "
    "same paired bootstrap resamples of the blanks (every system scored on the same resampled blanks); two systems "
    "whose rank intervals overlap may be in either order on other blanks like these. Baselines and the paper's rows "
    "are not ranked. "
    "**Verified**: scored from a run the maintainers made, or from lmms-eval logged samples that carry the FIBER "
    "task's version and settings; every other row is self-reported."
)
PAIRWISE_TEXT = (
    "**Pairwise comparisons**: row - column on the same blanks, with the two-sided p-value of approximate "
    "randomization (as `fiberbench evaluate` gives it) and that p-value after **Holm's correction** for the number "
    "of pairs compared (which keeps the chance of any false difference among them at 5%). **Bold**: Holm-corrected "
    "p below 0.05, a difference unlikely to be luck of the blanks."
)
SCORES = {"F1": ("f1",), "EM": ("exact_match",), "F1, label only": ("f1_label_only",),
          "EM, label only": ("exact_match_label_only",), "Correct@1": ("correct_at_k", "1"), "MAP": ("map",)}
RELEASE_COLUMN = "F1, release's"  # evaluate's `f1_release`, shown where the results carry it
COLUMNS = ["rank", "rank interval", "system", "verified", "F1", "F1 interval", "EM", "EM interval", "kind",
           "parameters (B)", "open weights", "video input", "run with", "date", "F1, label only", "EM, label only",
           "Correct@1", "MAP", RELEASE_COLUMN, "blanks", "answer reading", "link"]
NUMBERS = {*SCORES, RELEASE_COLUMN, "blanks", "parameters (B)"}  # sorted highest first; the others alphabetically
WIDTHS = {"rank": 90, "system": 200, "verified": 130, "F1 interval": 140, "EM interval": 140, "video input": 130,
          "run with": 150, "date": 110, "answer reading": 150, "link": 220}  # pixels; the others 80
ALL = "all"


def introduction(title: str, dataset: dict, settings: dict) -> str:
    """The page's heading: the split, how it is scored, and whether the data is SYNTHETIC."""
    synthetic = "\n\n**SYNTHETIC data**: the numbers say nothing about FIBER." * dataset["synthetic"]
    level = f"{100 * settings['confidence_level']:g}%"
    return (
        f"# {title}\n\nThe {dataset['split']} split of {dataset['name']} ({dataset['num_blanks']:,} blanks), scored by "
        f"`fiberbench evaluate`: EM and F1 in percent, each with its {level} confidence interval (percentile bootstrap "
        f"over the blanks, {settings['num_bootstrap']:,} resamples, seed {settings['seed']}).{synthetic}"
    )


def _score(row: dict, keys: tuple) -> float | None:
    value = row.get(keys[0])
    value = (value or {}).get(keys[1]) if len(keys) > 1 else value
    return None if value is None else round(value, 1)


def _video_input(metadata: dict) -> str | None:
    rule, frames, fps = metadata["video_input"], metadata["frames"], metadata["fps"]
    if rule == "fps":
        return f"{fps:g} fps" + (f", at most {frames} frames" if frames else "")
    return f"{frames} frames" if rule == "frames" and frames else rule


def columns(board: dict) -> list[str]:
    """The table's columns: "F1, release's" only where a system's results carry it."""
    release = any("f1_release" in row for row in board["results"]["systems"].values())
    return [column for column in COLUMNS if column != RELEASE_COLUMN or release]


def table_rows(board: dict, kind: str = ALL, open_weights: str = ALL, video_input: str = ALL) -> list[list]:
    """The board's table, best F1 first: a row per system that passes the filters (rank, rank interval, scores, how
    it was run) and per baseline (no rank, always shown)."""
    results, shown = board["results"], columns(board)
    rows, rank = [], 0
    for name, row in leaderboard_rows(results).items():
        metadata = board["metadata"].get(name)
        cells = {"system": name, "blanks": row.get("num_blanks", results["dataset"]["num_blanks"]),
                 **{column: _score(row, keys) for column, keys in SCORES.items()},
                 RELEASE_COLUMN: _score(row, ("f1_release",)),
                 **{f"{label} interval": "[{:.1f}, {:.1f}]".format(*row["confidence_intervals"][metric])
                    for label, metric in (("F1", "f1"), ("EM", "exact_match"))}}
        if metadata is None:
            cells["rank"] = "baseline"
        else:
            rank += 1
            low, high = board["rank_intervals"][name]
            filters = {"kind": kind, "open_weights": open_weights, "video_input": video_input}
            if any(value not in (ALL, metadata[field]) for field, value in filters.items()):
                continue
            parameters = metadata["parameters"]
            cells.update({
                "rank": str(rank), "rank interval": str(low) if low == high else f"{low}-{high}",
                "verified": "✓ verified" if metadata["verified"] else "self-reported",
                "parameters (B)": None if parameters is None else float(f"{parameters / 1e9:.3g}"),
                "video input": _video_input(metadata),
                "run with": ", task ".join(filter(None, (metadata["run_with"], metadata["task_version"]))),
                **{column: metadata[column.replace(" ", "_")]
                   for column in ("kind", "open weights", "answer reading", "date", "link")},
            })
        rows.append([cells.get(column) for column in shown])
    return rows


def sorted_rows(rows: list[list], shown: list[str], column: str) -> list[list]:
    """The table's rows sorted by `column`: numbers highest first, texts in alphabetical order, empty cells last;
    "rank" and "rank interval" keep the board's order (best F1 first), and ties keep it too."""
    if column in ("rank", "rank interval") or column not in shown:
        return rows
    index, number = shown.index(column), column in NUMBERS
    filled = sorted((row for row in rows if row[index] not in (None, "")),
                    key=lambda row: -row[index] if number else str(row[index]).casefold())
    return filled + [row for row in rows if row[index] in (None, "")]


def paper_rows(split: str) -> list[list]:
    """The paper's Table 3 for `split` (none for a split it does not report): method, EM, F1, which F1, source."""
    return [[method, *by_split[split], NORMALIZED_F1 if method.startswith("human") else RELEASE_F1, REPORTED]
            for method, by_split in PAPER_TABLE_3.items() if split in by_split]


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
    """evaluate's by-category figure of the `chosen` systems and the baselines (None without categories); a '$' in a
    name is a dollar, not the start of mathtext (text objects keep the setting they were made with)."""
    import matplotlib

    results = board["results"]
    systems = {name: row for name, row in results["systems"].items() if name in chosen}
    if not all("by_category" in row for row in [*systems.values(), *results.get("baselines", {}).values()]):
        return None
    with matplotlib.rc_context({"text.parse_math": False}):
        return category_figure({**results, "systems": systems})
