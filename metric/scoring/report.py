"""results.md: the leaderboard of a results.json as Markdown, each score with its interval, and the comparisons."""

import math
import re
import unicodedata

from fiberbench.metric.scoring.results import HUMAN_AGREEMENT

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
    step = f"noun-phrase step with {settings['spacy_model']}" if settings.get("spacy_model") else "without the noun-phrase step"
    return f"{reader}, {step}"


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
        lines += ["", "Human agreement: per blank, the mean over its annotators of their first answer scored against the "
                  "other annotators and the label (leave one annotator out, the human row of the paper's Table 3), on "
                  f"the {results['baselines'][HUMAN_AGREEMENT]['num_blanks']} blanks with an annotator to score."]
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
