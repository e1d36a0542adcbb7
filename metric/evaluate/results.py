"""The scores of every system and baseline on a split (results.json's `systems`, `baselines`, `comparisons`), all from
the metric's functions: per-blank scores, their means, bootstrap intervals and scores by category, and comparisons.

Each interval and p-value depends only on its own per-blank scores and the seed, so each equals what
`evaluate.load("metric/fiber_metric").compute` (or the metric's plain functions) gives for the same inputs.
"""

import json
from itertools import combinations

import numpy as np

from fiberbench.metric import compare_systems, human_agreement, mcnemar_p_value, score_predictions, summarize
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.metric.evaluate.predictions import Split, System

MOST_FREQUENT_ANSWER, HUMAN_AGREEMENT = "most frequent answer", "human agreement"


def score_columns(system: System, split: Split) -> dict:
    """The per-blank scores (percent) behind every mean of the system's row: the metric's per-example scores against
    every answer and against the label alone, and of its ranked candidates."""
    every = score_predictions(system.predictions, split.references, per_example=True, candidates=system.candidates)
    label_only = score_predictions(system.predictions, [[label] for label in split.labels], per_example=True)
    columns = {
        "exact_match": every["exact_match_per_example"],
        "f1": every["f1_per_example"],
        "exact_match_label_only": label_only["exact_match_per_example"],
        "f1_label_only": label_only["f1_per_example"],
    }
    if system.candidates is not None:
        columns.update({("correct_at_k", k): column for k, column in every["correct_at_k_per_example"].items()})
        columns["map"] = every["average_precision_per_example"]
    return columns


def row_scores(columns: dict, categories: list[str] | None, settings: dict) -> dict:
    """A leaderboard row: the means of its per-blank `columns`, their intervals and the scores by category."""
    summary = summarize(columns, categories, **settings)
    row = {**summary["means"], "confidence_intervals": summary["intervals"]}
    if categories is not None:
        row["by_category"] = {
            category: {"count": scores["count"], **scores["means"], "confidence_intervals": scores["intervals"]}
            for category, scores in summary["by_category"].items()
        }
    return row


def compare_pairs(rows: dict[str, dict], ranked: list[str], settings: dict) -> list[dict]:
    """Every pair of systems (the better-ranked first) on F1 and EM, as `compare_systems` compares one pair, with
    McNemar's test for EM."""
    pairs = [(a, b, metric) for a, b in combinations(ranked, 2) for metric in ("f1", "exact_match")]
    if not pairs:
        return []
    scores_a, scores_b = (np.stack([rows[pair[side]][pair[2]] for pair in pairs], axis=1) for side in (0, 1))
    compared = compare_systems(scores_a, scores_b, num_permutations=settings["num_bootstrap"], **settings)
    comparisons = []
    for (a, b, metric), comparison in zip(pairs, compared):
        comparisons.append({"systems": [a, b], "metric": metric, **comparison})
        if metric == "exact_match":
            comparisons[-1]["mcnemar_p_value"] = mcnemar_p_value(rows[a][metric], rows[b][metric])
    return comparisons


def evaluate_systems(systems: list[System], split: Split, settings: dict, with_baselines: bool) -> dict:
    """results.json: the `dataset`, the `settings` (confidence_level, num_bootstrap, seed), every system's scores, how
    their replies were read, the `comparisons` of every pair and, `with_baselines`, the most frequent training answer
    and human agreement (each annotator's first answer against the others)."""
    columns = {system.name: score_columns(system, split) for system in systems}
    rows = {
        system.name: {"file": system.file, "reading": system.reading, "correct_at_k": None, "map": None,
                      **row_scores(columns[system.name], split.categories, settings)}
        for system in systems
    }
    results = {
        "dataset": split.dataset,
        "settings": {**settings, "num_permutations": settings["num_bootstrap"]},
        "systems": rows,
        "readings_differ": len({json.dumps(s.reading, sort_keys=True) for s in systems if s.reading}) > 1,
        "comparisons": compare_pairs(columns, sorted(rows, key=lambda name: -rows[name]["f1"]), settings),
    }
    if with_baselines:
        answer = most_frequent_answer(split.train_labels or [])
        guessed = score_columns(System(MOST_FREQUENT_ANSWER, "", [answer] * len(split.keys), None), split)
        agreement = human_agreement(split.labels, split.additional_answers, per_example=True, first_answers_only=True)
        per_caption = {metric: agreement[f"first_answers_{metric}_per_caption"] for metric in ("exact_match", "f1")}
        kept = [blank for blank, score in enumerate(per_caption["f1"]) if score is not None]
        human = {metric: [column[blank] for blank in kept] for metric, column in per_caption.items()}
        categories = None if split.categories is None else [split.categories[blank] for blank in kept]
        results["baselines"] = {
            MOST_FREQUENT_ANSWER: {"answer": answer, **row_scores(guessed, split.categories, settings)},
            HUMAN_AGREEMENT: {"num_blanks": len(kept), **row_scores(human, categories, settings)},
        }
    return results
