"""by_category.png: F1 and EM by category of every leaderboard row, with its confidence interval (matplotlib, the
`plots` extra, imported where the chart is drawn)."""

import hashlib
import logging
from pathlib import Path

import numpy as np

from fiberbench.metric.scoring.report import leaderboard_rows
from fiberbench.metric.scoring.results import HUMAN_AGREEMENT, MOST_FREQUENT_ANSWER
from fiberbench.outputs import atomic_path

logger = logging.getLogger(__name__)

# matplotlib's tab10 without its grey, which is the baselines' (grey and hatched: (colour, hatch)).
SYSTEM_PALETTE = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
                  "tab:cyan")
BASELINE_STYLES = {MOST_FREQUENT_ANSWER: ("0.6", "//"), HUMAN_AGREEMENT: ("0.85", "..")}


def system_colours(names: list[str]) -> dict[str, str]:
    """Each system's colour, from its name alone (the same from run to run, whatever its rank): a name hashes to a slot
    of `SYSTEM_PALETTE`, and names meeting in one take the next free ones. Colours repeat only past nine systems.

    >>> colours = system_colours(["T5 + I3D", "T5 text-only"])
    >>> colours == system_colours(["T5 text-only", "T5 + I3D"]) and len(set(colours.values())) == 2
    True
    """
    colours, free = {}, []
    for name in sorted(names):
        free = free or list(range(len(SYSTEM_PALETTE)))
        slot = int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % len(SYSTEM_PALETTE)
        slot = min(free, key=lambda candidate: (candidate - slot) % len(SYSTEM_PALETTE))
        free.remove(slot)
        colours[name] = SYSTEM_PALETTE[slot]
    return colours


def plot_layout(num_categories: int, num_bars: int) -> tuple[int, int, float, float]:
    """The panels (rows, columns) and size in inches, at 100 dpi: EM beside F1 while a panel fits in 10 inches with
    room for the value over every bar, one above the other past that."""
    panel = max(5.0, 1.2 + num_categories * (0.34 * num_bars + 0.45))
    return (1, 2, 2 * panel + 0.4, 6.8) if panel <= 10 else (2, 1, panel, 12.0)


def category_figure(results: dict):
    """F1 and EM by category, a bar per leaderboard row (systems in their colours, baselines grey and hatched) with a
    whisker from its interval's low to its high end: one of width 0 still shows, one not holding the mean as it is."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = leaderboard_rows(results)
    colours = system_colours(list(results["systems"]))
    baselines = {id(row): kind for kind, row in results.get("baselines", {}).items()}
    styles = {name: BASELINE_STYLES[baselines[id(row)]] if id(row) in baselines else (colours[name], None)
              for name, row in rows.items()}
    counts = {category: scores["count"] for row in rows.values() for category, scores in row["by_category"].items()}
    categories = sorted(counts)
    num_rows, num_columns, width, height = plot_layout(len(categories), len(rows))
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    axes = figure.subplots(num_rows, num_columns, sharey=True, squeeze=False).ravel()
    bar_width = 0.8 / len(rows)
    for ax, (metric, shown) in zip(axes, {"f1": "F1", "exact_match": "EM"}.items()):
        for index, (name, row) in enumerate(rows.items()):
            scores = [row["by_category"].get(category) for category in categories]
            values = np.array([score[metric] if score else np.nan for score in scores])
            low, high = np.array([score["confidence_intervals"][metric] if score else [np.nan] * 2 for score in scores]).T
            x = np.arange(len(categories)) + (index - (len(rows) - 1) / 2) * bar_width
            ax.bar(x, values, bar_width, color=styles[name][0], hatch=styles[name][1], edgecolor="0.25", linewidth=0.6,
                   label=name)
            ax.errorbar(x, (low + high) / 2, yerr=(high - low) / 2, fmt="none", ecolor="0.15", elinewidth=1.2, capsize=3)
            for position, value, top in zip(x, values, high):
                if not np.isnan(value):
                    ax.text(position, max(top, value) + 1.5, f"{value:.0f}", ha="center", va="bottom", fontsize=9)
        ax.set_title(f"{shown} by category", fontsize=14)
        ax.set_xticks(np.arange(len(categories)), [f"{category}\n({counts[category]:,} blanks)" for category in categories])
        ax.tick_params(labelsize=11)
        ax.set_xlabel("category of the blanked phrase", fontsize=12)
        ax.set_ylabel(f"{shown} (%)", fontsize=12)
        ax.set(ylim=(-4, 112), yticks=range(0, 101, 20))  # below 0: the caps of a whisker at 0 stand clear of the axis
        ax.grid(axis="y", alpha=0.3)
    dataset, level = results["dataset"], f"{100 * results['settings']['confidence_level']:g}%"
    synthetic = " (SYNTHETIC data)" if dataset["synthetic"] else ""
    figure.suptitle(f"{dataset['split']} split of {dataset['name']}{synthetic}; whiskers: {level} confidence intervals",
                    fontsize=14)
    handles = [Patch(facecolor=styles[name][0], hatch=styles[name][1], edgecolor="0.25", label=name) for name in rows]
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(rows), 4), fontsize=11)
    return figure


def write_chart(results: dict, path: Path) -> bool:
    """Write by_category.png to `path`, atomically; False, with a warning, where matplotlib is not installed or fails
    to import: the results are written all the same."""
    try:
        import matplotlib
    except Exception as error:  # noqa: BLE001 - a broken install too costs the chart only
        logger.warning("matplotlib cannot be imported (%s): no %s (`pip install fiber-benchmark[plots]`)", error, path.name)
        return False
    # Names, categories and the dataset's name are text: a '$' in them is a dollar, not the start of mathtext.
    with matplotlib.rc_context({"text.parse_math": False}), atomic_path(path) as temporary:
        category_figure(results).savefig(temporary, format="png", dpi=100)
    return True
