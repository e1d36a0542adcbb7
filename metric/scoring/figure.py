"""by_category.png: F1 and EM by category of every leaderboard row, with its confidence interval (matplotlib)."""

import hashlib
import importlib.util
import io
import logging
from pathlib import Path

from fiberbench.collector import collector_held_off
from fiberbench.files import atomic_path
from fiberbench.helper_processes import HelperError, HelperProcess

from fiberbench.metric.scoring.report import leaderboard_rows
from fiberbench.metric.scoring.results import HUMAN_AGREEMENT, MOST_FREQUENT_ANSWER

logger = logging.getLogger(__name__)

# The systems' colours (matplotlib's tab10 without its grey, which is the baselines'): a system's is picked
# by its name (`system_colours`), so it keeps it from run to run whatever its rank.
SYSTEM_PALETTE = (
    "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"
)
# Baselines are grey and hatched, apart from the systems: (colour, hatch).
BASELINE_STYLES = {MOST_FREQUENT_ANSWER: ("0.6", "//"), HUMAN_AGREEMENT: ("0.85", "..")}
PLOT_METRICS = {"f1": "F1", "exact_match": "EM"}


def system_colours(names: list[str]) -> dict[str, str]:
    """Each system's colour, from its name alone: a name hashes (SHA-256) to a slot of `SYSTEM_PALETTE`, and names
    meeting in one slot take the next free ones, in the names' order. Colours repeat only past nine systems.

    >>> colours = system_colours(["T5 + I3D", "T5 text-only"])
    >>> colours == system_colours(["T5 text-only", "T5 + I3D"]) and len(set(colours.values())) == 2
    True
    """
    colours, free = {}, list(range(len(SYSTEM_PALETTE)))
    for name in sorted(names):
        if not free:
            free = list(range(len(SYSTEM_PALETTE)))
        slot = int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % len(SYSTEM_PALETTE)
        slot = min(free, key=lambda candidate: (candidate - slot) % len(SYSTEM_PALETTE))
        free.remove(slot)
        colours[name] = SYSTEM_PALETTE[slot]
    return colours


def plot_layout(num_categories: int, num_bars: int) -> tuple[int, int, float, float]:
    """by_category.png's panels (rows, columns) and size in inches, at 100 dpi: EM beside F1 while a panel fits in
    10 inches with room for the value over every bar, one above the other past that."""
    panel = max(5.0, 1.2 + num_categories * (0.34 * num_bars + 0.45))
    return (1, 2, 2 * panel + 0.4, 6.8) if panel <= 10 else (2, 1, panel, 12.0)


def category_figure(results: dict):
    """by_category.png's figure: F1 and EM by category, a bar per leaderboard row with its confidence interval.

    Each system has the colour of its name (`system_colours`); baselines are grey and hatched. A
    whisker runs from the interval's low to its high end with caps, so an interval of width 0 (a bar
    at 0 with no resample above it) still shows, and one that does not hold the mean (few resamples)
    is drawn as it is.
    """
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows = leaderboard_rows(results)
    baselines = {
        f'{name} "{row["answer"]}" (baseline)' if "answer" in row else f"{name} (baseline)": name
        for name, row in results.get("baselines", {}).items()
    }
    colours = system_colours(list(results["systems"]))
    styles = {
        name: BASELINE_STYLES[baselines[name]] if name in baselines else (colours[name], None) for name in rows
    }
    counts = {}
    for row in rows.values():
        counts.update({category: scores["count"] for category, scores in row["by_category"].items()})
    categories = sorted(counts)
    num_rows, num_columns, width, height = plot_layout(len(categories), len(rows))
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    axes = figure.subplots(num_rows, num_columns, sharey=True, squeeze=False).ravel()
    bar_width = 0.8 / len(rows)
    for ax, (metric, metric_name) in zip(axes, PLOT_METRICS.items()):
        for index, (name, row) in enumerate(rows.items()):
            colour, hatch = styles[name]
            scores = [row["by_category"].get(category) for category in categories]
            values = np.array([score[metric] if score else np.nan for score in scores])
            low, high = np.array([score["confidence_intervals"][metric] if score else [np.nan] * 2 for score in scores]).T
            x = np.arange(len(categories)) + (index - (len(rows) - 1) / 2) * bar_width
            ax.bar(x, values, bar_width, color=colour, hatch=hatch, edgecolor="0.25", linewidth=0.6, label=name)
            ax.errorbar(x, (low + high) / 2, yerr=(high - low) / 2, fmt="none", ecolor="0.15", elinewidth=1.2, capsize=3)
            for position, value, top in zip(x, values, high):
                if not np.isnan(value):
                    ax.text(position, max(top, value) + 1.5, f"{value:.0f}", ha="center", va="bottom", fontsize=9)
        ax.set_title(f"{metric_name} by category", fontsize=14)
        ax.set_xticks(np.arange(len(categories)), [f"{category}\n({counts[category]:,} blanks)" for category in categories])
        ax.tick_params(labelsize=11)
        ax.set_xlabel("category of the blanked phrase", fontsize=12)
        ax.set_ylabel(f"{metric_name} (%)", fontsize=12)
        ax.set_ylim(-4, 112)  # below 0: the caps of a whisker at 0 stand clear of the axis
        ax.set_yticks(range(0, 101, 20))
        ax.grid(axis="y", alpha=0.3)
    dataset = results["dataset"]
    level = f"{100 * results['settings']['confidence_level']:g}%"
    synthetic = " (SYNTHETIC data)" if dataset["synthetic"] else ""
    figure.suptitle(
        f"{dataset['split']} split of {dataset['name']}{synthetic}; whiskers: {level} confidence intervals", fontsize=14
    )
    handles = [
        Patch(facecolor=styles[name][0], hatch=styles[name][1], edgecolor="0.25", label=name) for name in rows
    ]
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(rows), 4), fontsize=11)
    return figure


def png_by_category(results: dict) -> bytes:
    """by_category.png (`category_figure`) as the bytes of the PNG file."""
    import matplotlib

    png = io.BytesIO()
    # Names, categories and the dataset's name are text: a '$' in them is a dollar, not the start of mathtext.
    with matplotlib.rc_context({"text.parse_math": False}):
        category_figure(results).savefig(png, format="png", dpi=100)
    return png.getvalue()


def _import_matplotlib() -> None:
    with collector_held_off():
        import matplotlib.figure  # noqa: F401 - imported ahead, to draw at once when asked


class CategoryPlot:
    """by_category.png drawn in a helper process (`fiberbench.helper_processes`), which imports matplotlib as soon as
    it starts: while `fiberbench evaluate` scores, not after (matplotlib's import is half a second of a cold
    command on 1,000 blanks). The PNG's bytes come back and are written here, atomically, so that a full disk
    or a folder in the way is named as for any other output. Without matplotlib, no process and no plot.
    """

    def __init__(self):
        self._process = None
        if importlib.util.find_spec("matplotlib") is not None:
            self._process = HelperProcess("the process drawing by_category.png")
            self._process.send(_import_matplotlib)

    def write(self, results: dict, path: Path) -> bool:
        """by_category.png of `results` written to `path`; False without matplotlib, or with one that fails to import
        (the results are written all the same)."""
        if self._process is None:
            logger.warning("matplotlib is not installed: no %s (`pip install fiber-benchmark[plots]`)", path.name)
            return False
        self._process.send(png_by_category, results)
        try:
            self._process.receive()  # the import
        except HelperError as error:
            logger.warning("matplotlib cannot be imported (%s): no %s", error, path.name)
            return False
        png = self._process.receive()
        with atomic_path(path) as temporary:
            temporary.write_bytes(png)
        return True

    def close(self) -> None:
        """End the helper process (killed if it is still importing: the plot was not wanted)."""
        if self._process is not None:
            self._process.close()

    def __enter__(self) -> "CategoryPlot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
