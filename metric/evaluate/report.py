"""What `fiberbench evaluate` shows of a results.json: results.md (the leaderboard, each score with its interval, and
the comparisons) and by_category.png (matplotlib, the `plots` extra, imported where the chart is drawn)."""

import hashlib
import logging
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
_BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def plain_text(text: str) -> str:
    """`text` as one line a terminal or a chart shows as it is: white space runs and line breaks become one space;
    control characters (an ANSI escape's ESC too), lone surrogates and the bidirectional overrides that reorder what
    follows become U+FFFD."""
    return "".join("\ufffd" if unicodedata.category(char) in ("Cc", "Cs") or char in _BIDI_CONTROLS else char
                   for char in " ".join(text.split()))


def markdown_text(text: str) -> str:
    """`text` as one line of Markdown (a table cell, a title) shows it: `plain_text`, with what would make a cell, a
    link, emphasis, code or HTML escaped.

    >>> markdown_text("A | B\\n*new* row\\x1b[2J")
    'A \\\\| B \\\\*new\\\\* row\ufffd\\\\[2J'
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", plain_text(text))


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


def p_value_text(p_value: float) -> str:
    """A p-value as results.md prints it, one format for the column: four decimals, and below 0.0001 "<0.0001".

    >>> p_value_text(0.5), p_value_text(0.0123456), p_value_text(3e-12)
    ('0.5000', '0.0123', '<0.0001')
    """
    return "<0.0001" if p_value < 0.0001 else f"{p_value:.4f}"


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


def _difference(difference: float, interval: list[float]) -> str:
    return f"{difference:+.1f} [{interval[0]:+.1f}, {interval[1]:+.1f}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["", f"| {' | '.join(header)} |", "|---" * len(header) + "|", *(f"| {' | '.join(row)} |" for row in rows)]


METRIC_NAMES = {"f1": "F1", "exact_match": "EM", "vqa_accuracy": "VQA accuracy"}
SCORES = {**METRIC_NAMES, "f1_label_only": "F1, label only", "exact_match_label_only": "EM, label only"}


def leaderboard_markdown(results: dict) -> str:
    """results.md: the leaderboard (each score with its confidence interval, the systems' ranks), coverage, the gain
    from the video, how the replies were read, and the comparisons of every pair. Every name (of systems, files, the
    dataset, the baseline's answer) and every field a file gives is shown as text."""
    dataset, settings, systems = results["dataset"], results["settings"], results["systems"]
    level, blanks = f"{100 * settings['confidence_level']:g}%", dataset["num_blanks"]
    release = all("f1_release" in row for row in systems.values())
    scores = {**SCORES, **({"f1_release": "F1 (release)"} if release else {})}
    rows = []
    for name, row in leaderboard_rows(results).items():
        if name in systems:  # a baseline is shown, never ranked
            low, high = row["rank_interval"]
            ranks = [str(row["rank"]), f"{low}-{high}" if low < high else str(low)]
            answered = row["coverage"]["answered"]
        else:
            ranks, answered = ["–", "–"], row.get("num_blanks", blanks)
        rows.append([*ranks, markdown_text(name), *(_cell(row, score) for score in scores),
                     _cell(row, "correct_at_k", "1"), _cell(row, "map"), f"{answered:,} of {blanks:,}"])
    title = f"the {dataset['split']} split of {dataset['name']} (config {dataset['config']})"
    lines = [f"# FIBER: {markdown_text(title)}", ""]
    if dataset["synthetic"]:
        lines += ["**SYNTHETIC data** (the bundled sample, or a build of it): the numbers say nothing about FIBER.", ""]
    lines += [f"{blanks:,} blanks. Scores in percent on the blanks a system answered, each with its {level} confidence "
              f"interval [low, high] (percentile bootstrap over the blanks, {settings['num_bootstrap']:,} resamples, "
              f"seed {settings['seed']}).", "",
              f"**How to read a confidence interval.** [low, high] holds the scores the system would likely get on "
              f"another set of as many blanks like these ({level} of the resampled sets score in it); two systems "
              "whose intervals overlap may still differ: the comparisons below say whether they do.", "",
              "**Rank interval**: from 1 + the systems significantly better in F1 to n - those significantly worse, by "
              "the Holm-corrected comparisons below, so that two systems whose intervals do not overlap always differ "
              "significantly there. Baselines are not ranked.",
              *_table(["rank", "rank interval", "system", *scores.values(), "Correct@1", "MAP", "answered"], rows)]
    if release:
        lines += ["", "F1 (release): F1 as the FIBER release's code computed it for its models (raw answers split on "
                  "white space, no normalization), to set a system beside the paper's Table 3; F1 is the paper's "
                  "text's definition, the one to report."]
    if HUMAN_AGREEMENT in results.get("baselines", {}):
        lines += ["", "Human agreement: per blank, the mean over its annotators of their first answer scored against "
                  "the other annotators and the label (leave one annotator out, the human row of the paper's Table 3), "
                  f"on the {results['baselines'][HUMAN_AGREEMENT]['num_blanks']} blanks with an annotator to score."]
    read = {name: row["reading"] for name, row in systems.items() if row.get("reading") is not None}
    if read:
        lines += ["", "Answers read from the models' replies by fiberbench's answer reader:", "",
                  *(f"- {markdown_text(name)}: {markdown_text(describe_reading(how))}" for name, how in read.items()),
                  *(["", f"**{READ_DIFFERENTLY}**"] if results["readings_differ"] else [])]
    lines += coverage_lines(results) + gain_lines(results, level) + comparison_lines(results, level)
    return "\n".join(lines) + "\n"


def coverage_lines(results: dict) -> list[str]:
    """Each system's blanks answered where some are missing, with its scores as the paper would count them, and
    whether the compared systems answered different clips."""
    lines = [f"- {markdown_text(name)}: {row['coverage']['answered']:,} of {row['coverage']['blanks']:,} blanks "
             f"answered; {row['coverage']['missing']:,} clips missing. Missing counted as wrong, as the paper would: "
             + ", ".join(f"{shown} {_cell(row['missing_as_wrong'], metric)}" for metric, shown in METRIC_NAMES.items())
             for name, row in results["systems"].items() if row["coverage"]["missing"]]
    if results["clips_differ"]:
        lines.append(f"- The systems answered different sets of clips (`clips_fingerprint` in results.json): the ranks "
                     f"and comparisons use the {results['compared_blanks']:,} blanks all of them answered.")
    return ["", "## Coverage", "", *lines] if lines else []


def gain_lines(results: dict, level: str) -> list[str]:
    """The gain from the video of each system given with its blind control, overall and by category, in numbers and,
    where an interval holds zero, in words."""
    gains = {markdown_text(name): row["video_gain"] for name, row in results["systems"].items() if "video_gain" in row}
    overall = [[name, shown, f"{gain['count']:,}", f"{gain[metric]['with_video']:.1f}",
                f"{gain[metric]['without_video']:.1f}", _difference(gain[metric]["gain"], gain[metric]["gain_ci"]),
                p_value_text(gain[metric]["p_value"])] for name, gain in gains.items()
               for metric, shown in METRIC_NAMES.items()]
    by_category = [[name, markdown_text(category), f"{found['count']:,}",
                    *(_difference(found[metric]["gain"], found[metric]["gain_ci"]) for metric in METRIC_NAMES)]
                   for name, gain in gains.items() for category, found in gain.get("by_category", {}).items()]
    words = [f"- {name}: the {shown} gain's interval holds zero: on these blanks the system is not shown to do better "
             "with the video than without it." for name, gain in gains.items() for metric, shown in METRIC_NAMES.items()
             if gain[metric]["gain_ci"][0] <= 0 <= gain[metric]["gain_ci"][1]]
    if not gains:
        return []
    lines = ["", "## Gain from the video", "",
             "Each system against its blind control (the same system without the video), on the blanks both answered: "
             f"the score with the video minus the score without, with its paired {level} interval and p-value (EM: "
             "McNemar's exact test; F1 and VQA accuracy: the sign-flip test).",
             *_table(["system", "metric", "blanks", "with video", "without video", "gain [interval]", "p"], overall)]
    if by_category:
        header = ["system", "category", "blanks", *METRIC_NAMES.values()]
        lines += ["", "By category (gain [interval]):", *_table(header, by_category)]
    return lines + (["", *words] if words else [])


def comparison_lines(results: dict, level: str) -> list[str]:
    """The comparisons of every pair, on the blanks every system answered, with the minimum detectable difference."""
    blanks, smallest = results["compared_blanks"], results["minimum_detectable_difference"]
    rows = [[*map(markdown_text, c["systems"]), METRIC_NAMES[c["metric"]], _difference(c["difference"],
            c["difference_ci"]), p_value_text(c["p_value"]), p_value_text(c["p_value_holm"])]
            for c in results["comparisons"]]
    if not rows:
        return []
    return ["", "## Comparisons", "",
            f"On the {blanks:,} blanks every system answered: A - B with its paired bootstrap {level} interval, and p, "
            "two-sided: for EM by McNemar's exact test, for F1 and VQA accuracy by the sign-flip test in its normal "
            "approximation (z = sum(d) / sqrt(sum(d^2)) over the blanks' differences d). Neither has a floor, so a "
            "real difference passes Holm's correction however many systems are compared; \"p, Holm\" is p after it, "
            "over each metric's pairs, which the rank intervals use.", "",
            "**How to read a p-value.** p is how often a difference at least as large as A - B would come up by luck "
            "of the blanks if the two systems were equally good: below 0.05, it is unlikely to be luck.", "",
            "**Minimum detectable difference.** Differences under "
            + ", ".join(f"{smallest[metric] or 0:.1f} {shown}" for metric, shown in METRIC_NAMES.items())
            + f" points cannot be told from luck on these {blanks:,} blanks (a paired test at 5% finds a difference of "
            "that size 80% of the time, given the per-blank spread and correlation of these systems' scores).",
            *_table(["A", "B", "metric", "A - B [interval]", "p", "p, Holm"], rows)]


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
                   label=plain_text(name))
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
    handles = [Patch(facecolor=styles[name][0], hatch=styles[name][1], edgecolor="0.25", label=plain_text(name))
               for name in rows]
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
