"""What the board page shows of a computed board: its texts, the table and its filters, the paper's rows, the pairwise
matrix and the chart; names as text (plain strings in the table, escaped in the matrix, no mathtext in the chart)."""

import html

from fiberbench.metric.evaluate.report import METRIC_NAMES, category_figure, leaderboard_rows, p_value_text

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
    "comparable point for point. The column \"F1, release's\" puts each scored system on the paper's footing."
)
RANKS_TEXT = (
    "**Rank** orders the systems by F1. **Rank interval**: from 1 + the systems significantly better in F1 to n - "
    "those significantly worse, by the Holm-corrected comparisons below, so two systems whose rank intervals do not "
    "overlap always differ significantly there (ranks drawn from bootstrap resamples, each system alone, can separate "
    "systems the corrected tests cannot tell apart). Baselines and the paper's rows are not ranked. **Answered**: the "
    "blanks of the split a system answered (a clip whose video it lacked is missing, not wrong); its scores stand on "
    "them, and each pair is compared on the blanks both answered. **Video gain**: F1 with the video minus F1 of the "
    "system's blind control (the same system without the video, where one was submitted), with its 95% interval. "
    "**Verified**: scored from a run the maintainers made, or from lmms-eval logged samples that carry the FIBER "
    "task's version and settings; every other row is self-reported."
)
PAIRWISE_TEXT = (
    "**Pairwise comparisons**: row - column on the blanks both answered, with the two-sided p-value `fiberbench "
    "evaluate` gives (EM: McNemar's exact test; F1 and VQA accuracy: the sign-flip test, which has no floor) and that "
    "p-value after **Holm's correction** for the number of pairs compared (which keeps the chance of any false "
    "difference among them at 5%). **Bold**: Holm-corrected p below 0.05, a difference unlikely to be luck of the "
    "blanks; the rank intervals are drawn from the F1 matrix."
)
SCORES = {"F1": ("f1",), "EM": ("exact_match",), "VQA accuracy": ("vqa_accuracy",),
          "F1, label only": ("f1_label_only",), "EM, label only": ("exact_match_label_only",),
          "Correct@1": ("correct_at_k", "1"), "MAP": ("map",), "F1, release's": ("f1_release",)}
COLUMNS = ["rank", "rank interval", "system", "verified", "F1", "F1 interval", "EM", "EM interval", "VQA accuracy",
           "answered", "video gain", "video gain interval", "kind", "parameters (B)", "open weights", "video input",
           "run with", "date", "F1, label only", "EM, label only", "Correct@1", "MAP", "F1, release's",
           "answer reading", "link"]
NUMBERS = {*SCORES, "answered", "video gain", "parameters (B)"}  # sorted as numbers
WIDTHS = {"rank": 90, "system": 200, "verified": 130, "F1 interval": 140, "EM interval": 140, "video gain interval": 140,
          "video input": 130, "run with": 150, "date": 110, "answer reading": 150, "link": 220}  # pixels; others 80
ALL = "all"


def introduction(title: str, dataset: dict, settings: dict) -> str:
    """The page's heading: the split, how it is scored, and whether the data is SYNTHETIC."""
    synthetic = "\n\n**SYNTHETIC data**: the numbers say nothing about FIBER." * dataset["synthetic"]
    level = f"{100 * settings['confidence_level']:g}%"
    return (
        f"# {title}\n\nThe {dataset['split']} split of {dataset['name']} ({dataset['num_blanks']:,} blanks), scored by "
        f"`fiberbench evaluate`: EM, F1 and VQA accuracy (agreement-weighted) in percent, each with its {level} "
        f"confidence interval (percentile bootstrap over the blanks, {settings['num_bootstrap']:,} resamples, seed "
        f"{settings['seed']}).{synthetic}"
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


def table_rows(board: dict, kind: str = ALL, open_weights: str = ALL, video_input: str = ALL) -> list[list]:
    """The board's table, best F1 first: a row per system that passes the filters (rank, rank interval, scores,
    coverage, gain from the video, how it was run) and per baseline (no rank, always shown)."""
    results, rows = board["results"], []
    for name, row in leaderboard_rows(results).items():
        metadata = board["metadata"].get(name)
        cells = {"system": name, "answered": row.get("num_blanks", results["dataset"]["num_blanks"]),
                 **{column: _score(row, keys) for column, keys in SCORES.items()},
                 **{f"{label} interval": "[{:.1f}, {:.1f}]".format(*row["confidence_intervals"][metric])
                    for label, metric in (("F1", "f1"), ("EM", "exact_match"))}}
        if metadata is None:
            cells["rank"] = "baseline"
        else:
            filters = {"kind": kind, "open_weights": open_weights, "video_input": video_input}
            if any(value not in (ALL, metadata[field]) for field, value in filters.items()):
                continue
            (low, high), parameters, gain = row["rank_interval"], metadata["parameters"], row.get("video_gain")
            cells.update({
                "rank": str(row["rank"]), "rank interval": str(low) if low == high else f"{low}-{high}",
                "verified": "✓ verified" if metadata["verified"] else "self-reported",
                "answered": row["coverage"]["answered"],
                "video gain": gain and round(gain["f1"]["gain"], 1),
                "video gain interval": gain and "[{:+.1f}, {:+.1f}]".format(*gain["f1"]["gain_ci"]),
                "parameters (B)": None if parameters is None else float(f"{parameters / 1e9:.3g}"),
                "video input": _video_input(metadata),
                "run with": ", task ".join(filter(None, (metadata["run_with"], metadata["task_version"]))),
                **{column: metadata[column.replace(" ", "_")]
                   for column in ("kind", "open weights", "answer reading", "date", "link")},
            })
        rows.append([cells.get(column) for column in COLUMNS])
    return rows


def paper_rows(split: str) -> list[list]:
    """The paper's Table 3 for `split` (none for a split it does not report): method, EM, F1, which F1, source."""
    return [[method, *by_split[split], NORMALIZED_F1 if method.startswith("human") else RELEASE_F1, REPORTED]
            for method, by_split in PAPER_TABLE_3.items() if split in by_split]


def pairwise_html(board: dict, metric: str) -> str:
    """The smallest difference these blanks can detect, and the matrix of paired differences (row - column) on `metric`,
    each with its p-value and its Holm-corrected p-value (bold where that is below 0.05)."""
    results, shown = board["results"], METRIC_NAMES[metric]
    names, blanks, cells = list(results["systems"]), results["dataset"]["num_blanks"], {}
    for comparison in results["comparisons"]:
        if comparison["metric"] == metric:
            (a, b), adjusted = comparison["systems"], comparison["p_value_holm"]
            on = f"; on {comparison['blanks']:,} blanks" * (comparison["blanks"] < blanks)
            text = html.escape(f" (p {p_value_text(comparison['p_value'])}, Holm {p_value_text(adjusted)}{on})")
            cells[a, b] = f"{comparison['difference']:+.1f}{text}", adjusted
            cells[b, a] = f"{0.0 - comparison['difference']:+.1f}{text}", adjusted  # never "-0.0"
    smallest = results["minimum_detectable_difference"][metric]
    lines = [f"<p>Differences under {smallest:.1f} {shown} points cannot be told from luck on these "
             f"{results['compared_blanks']:,} blanks (those every system answered).</p>"
             if smallest is not None else "",
             "<table class='pairwise'><tr><th>row - column</th>", *(f"<th>{html.escape(name)}</th>" for name in names),
             "</tr>"]
    for row in names:
        tds = ("<td>–</td>" if row == column else f"<td><b>{cells[row, column][0]}</b></td>"
               if cells[row, column][1] < 0.05 else f"<td>{cells[row, column][0]}</td>" for column in names)
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
