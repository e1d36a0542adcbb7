"""What `fiberbench evaluate` shows of a results.json: results.md (the leaderboard, each score with its interval, and
the comparisons) and by_category.png (matplotlib, the `plots` extra, imported where the chart is drawn)."""

import hashlib
import logging
import math
import re
import unicodedata
from pathlib import Path

import numpy as np

from fiberbench.metric.evaluate.results import HUMAN_AGREEMENT, MOST_FREQUENT_ANSWER
from fiberbench.outputs import atomic_path

logger = logging.getLogger(__name__)

READ_DIFFERENTLY = (
    "The systems' replies were read differently (see above): part of a difference between them may be the reading's."
)
# Characters that would make a table cell, a link, emphasis, code or HTML of a name in Markdown.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*|<>\[\]])")


def markdown_text(text: str) -> str:
    """`text` as one line of Markdown (a table cell, a title) shows it: white space runs and line breaks become one
    space, control characters U+FFFD, and what would make a cell, a link, emphasis, code or HTML is escaped.

    >>> markdown_text("A | B\\n*new* row")
    'A \\\\| B \\\\*new\\\\* row'
    """
    line = "".join("\ufffd" if unicodedata.category(char) == "Cc" else char for char in " ".join(text.split()))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", line)


def describe_reading(settings: dict) -> str:
    """How a file's answers were read from replies (predict's `reader_settings`), in words.

    >>> describe_reading({"version": 2, "spacy_model": None})
    'reader 2, without the noun-phrase step'
    """
    version = settings.get("version")
    reader = f"reader {version}" if version is not None else "reader 1 (before versions were recorded)"
    if settings.get("spacy_model"):
        return f"{reader}, noun-phrase step with {settings['spacy_model']}"
    return f"{reader}, without the noun-phrase step"


def p_value_text(p_value: float, num_permutations: int) -> str:
    """A randomization p-value as results.md prints it: "0.034", or at its floor 1 / (trials + 1), where no trial was
    as extreme and the true p is smaller, "<" the floor rounded up to one significant digit.

    >>> p_value_text(0.5, 10_000), p_value_text(1 / 10_001, 10_000), p_value_text(1 / 501, 500)
    ('0.5', '<0.0001', '<0.002')
    """
    floor = 1 / (num_permutations + 1)
    if p_value > floor * (1 + 1e-9):
        return f"{p_value:.2g}"
    exponent = math.floor(math.log10(floor))
    digit = math.ceil(round(floor / 10**exponent, 9))
    exponent, digit = (exponent + 1, 1) if digit == 10 else (exponent, digit)
    return f"<{digit * 10.0**exponent:.{max(0, -exponent)}f}"


def leaderboard_rows(results: dict) -> dict[str, dict]:
    """The systems and baselines, best F1 first; a baseline's name says it is one (and its answer)."""
    rows = dict(results["systems"])
    for name, row in results.get("baselines", {}).items():
        rows[f'{name} "{row["answer"]}" (baseline)' if "answer" in row else f"{name} (baseline)"] = row
    return dict(sorted(rows.items(), key=lambda item: -item[1]["f1"]))


def _cell(row: dict, name: str, key: str | None = None) -> str:
    """A score with its interval, "60.2 [55.1, 65.0]"; "–" where the row has no such score."""
    value, interval = row.get(name), row["confidence_intervals"].get(name)
    if key is not None:
        value, interval = (value or {}).get(key), (interval or {}).get(key)
    return "–" if value is None else f"{value:.1f} [{interval[0]:.1f}, {interval[1]:.1f}]"


def leaderboard_markdown(results: dict) -> str:
    """results.md: the leaderboard (each score with its confidence interval), how the replies were read, and the
    comparisons of every pair. Names (of systems, files, the dataset, the baseline's answer) are shown as text."""
    dataset, settings = results["dataset"], results["settings"]
    level, trials = f"{100 * settings['confidence_level']:g}%", settings["num_permutations"]
    title = f"the {dataset['split']} split of {dataset['name']} (config {dataset['config']})"
    lines = [f"# FIBER: {markdown_text(title)}", ""]
    if dataset["synthetic"]:
        lines += ["**SYNTHETIC data** (the bundled sample, or a build of it): the numbers say nothing about FIBER.", ""]
    lines += [
        f"{dataset['num_blanks']} blanks. Scores in percent, each with its {level} confidence interval [low, high] "
        f"(percentile bootstrap over the blanks, {settings['num_bootstrap']:,} resamples, seed {settings['seed']}).",
        "",
        f"**How to read a confidence interval.** [low, high] holds the scores the system would likely get on another "
        f"set of as many blanks like these ({level} of the resampled sets score in it); two systems whose intervals "
        "overlap may still differ: the comparisons below say whether they do.",
        "",
        "| rank | system | F1 | EM | F1, label only | EM, label only | Correct@1 | MAP |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rank, (name, row) in enumerate(leaderboard_rows(results).items(), start=1):
        cells = [_cell(row, score) for score in ("f1", "exact_match", "f1_label_only", "exact_match_label_only")]
        lines.append(f"| {rank} | {markdown_text(name)} | {' | '.join(cells)} | {_cell(row, 'correct_at_k', '1')} | "
                     f"{_cell(row, 'map')} |")
    if HUMAN_AGREEMENT in results.get("baselines", {}):
        lines += ["", "Human agreement: per blank, the mean over its annotators of their first answer scored against "
                  "the other annotators and the label (leave one annotator out, the human row of the paper's Table 3), "
                  f"on the {results['baselines'][HUMAN_AGREEMENT]['num_blanks']} blanks with an annotator to score."]
    read = {name: row["reading"] for name, row in results["systems"].items() if row.get("reading") is not None}
    if read:
        lines += ["", "Answers read from the models' replies by fiberbench's answer reader:", ""]
        lines += [f"- {markdown_text(name)}: {describe_reading(reading)}" for name, reading in read.items()]
        lines += ["", f"**{READ_DIFFERENTLY}**"] if results["readings_differ"] else []
    if results["comparisons"]:
        lines += [
            "", "## Comparisons", "",
            f"A - B on the same blanks, with its paired bootstrap {level} interval. p: two-sided, by approximate "
            f"randomization ({trials:,} trials, so never below {1 / (trials + 1):.1g}: at that floor it shows as "
            f"{p_value_text(1 / (trials + 1), trials)}); for EM also by McNemar's exact test.",
            "",
            "**How to read a p-value.** p is how often a difference at least as large as A - B comes up when the two "
            "systems' answers are swapped at random blank by blank, as if they were equally good: below 0.05, the "
            "difference is unlikely to be luck of the blanks.",
            "", "| A | B | metric | A - B | interval | p | p, McNemar |", "|---|---|---|---|---|---|---|",
        ]
        for comparison in results["comparisons"]:
            low, high = comparison["difference_ci"]
            mcnemar = comparison.get("mcnemar_p_value")
            cells = [*map(markdown_text, comparison["systems"]), "F1" if comparison["metric"] == "f1" else "EM",
                     f"{comparison['difference']:+.1f}", f"[{low:+.1f}, {high:+.1f}]",
                     p_value_text(comparison["p_value"], trials), "" if mcnemar is None else f"{mcnemar:.2g}"]
            lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


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
            low, high = np.array([s["confidence_intervals"][metric] if s else [np.nan] * 2 for s in scores]).T
            x = np.arange(len(categories)) + (index - (len(rows) - 1) / 2) * bar_width
            ax.bar(x, values, bar_width, color=styles[name][0], hatch=styles[name][1], edgecolor="0.25", linewidth=0.6,
                   label=name)
            ax.errorbar(x, (low + high) / 2, yerr=(high - low) / 2, fmt="none", ecolor="0.15", elinewidth=1.2,
                        capsize=3)
            for position, value, top in zip(x, values, high):
                if not np.isnan(value):
                    ax.text(position, max(top, value) + 1.5, f"{value:.0f}", ha="center", va="bottom", fontsize=9)
        ax.set_title(f"{shown} by category", fontsize=14)
        ax.set_xticks(np.arange(len(categories)), [f"{name}\n({counts[name]:,} blanks)" for name in categories])
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
        logger.warning("matplotlib cannot be imported (%s): no %s (the `plots` extra)", error, path.name)
        return False
    # Names, categories and the dataset's name are text: a '$' in them is a dollar, not the start of mathtext.
    with matplotlib.rc_context({"text.parse_math": False}), atomic_path(path) as temporary:
        category_figure(results).savefig(temporary, format="png", dpi=100)
    return True
