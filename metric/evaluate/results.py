"""results.json: every system's and baseline's scores on a split, all from the metric's functions (per-blank scores,
their means, bootstrap intervals, scores by category), each system's coverage and gain from the video over its blind
control, and the comparisons of every pair with rank intervals coherent with them.

Each interval and p-value depends only on its own per-blank scores and the seed, so each equals what
`evaluate.load("metric/fiber_metric").compute` (or the metric's plain functions) gives for the same inputs.
"""

import json
from itertools import combinations

import numpy as np

from fiberbench.metric import (compare_systems, holm, human_agreement, mean_std, minimum_detectable_difference,
                               rank_intervals, score_predictions, summarize)
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.metric.evaluate.predictions import Split, System
from fiberbench.records import clip_id, clips_fingerprint

MOST_FREQUENT_ANSWER, HUMAN_AGREEMENT = "most frequent answer", "human agreement"
# Compared pair by pair (Holm's correction within each), and in the gain from the video; ranks go by F1.
COMPARED = ("f1", "exact_match", "vqa_accuracy")
TESTS = {"exact_match": "McNemar's exact test", "f1": "sign-flip test (normal approximation)",
         "vqa_accuracy": "sign-flip test (normal approximation)"}


def score_columns(system: System, split: Split, release_f1: bool = False) -> dict:
    """The per-blank scores (percent) behind every mean of the system's row, one per blank of the split (a missing
    blank scored as its empty answer): EM, F1 and VQA accuracy, the label-only scores, with `release_f1` the
    release's F1, and Correct@K and MAP of ranked candidates."""
    every = score_predictions(system.predictions, split.references, per_example=True, candidates=system.candidates,
                              labels=split.labels, additional_answers=split.additional_answers)
    release = ("f1_release", "f1_release_label_only") if release_f1 else ()
    names = [*COMPARED, "exact_match_label_only", "f1_label_only", *release]
    columns = {name: np.array(every[f"{name}_per_example"]) for name in names}
    if system.candidates is not None:
        columns.update({("correct_at_k", k): np.array(at_k) for k, at_k in every["correct_at_k_per_example"].items()})
        columns["map"] = np.array(every["average_precision_per_example"])
    return columns


def answered(system: System, split: Split) -> np.ndarray:
    """Which blanks of the split the system answered (a row saying `"missing": true` did not)."""
    return np.ones(len(split.keys), bool) if system.answered is None else np.array(system.answered, bool)


def system_row(system: System, columns: dict, split: Split, settings: dict) -> dict:
    """A system's row: its scores on the blanks it answered, its coverage (with the fingerprint of the clips it
    answered) and, where some are missing, its EM, F1 and VQA accuracy as the paper would count them (missing = 0)."""
    kept = answered(system, split)
    categories = None if split.categories is None else [c for c, keep in zip(split.categories, kept) if keep]
    row = {"file": system.file, "reading": system.reading, "correct_at_k": None, "map": None,
           **summarize({name: column[kept] for name, column in columns.items()}, categories, **settings)}
    clips = [clip_id(*key) for key, keep in zip(split.keys, kept) if keep]
    row["coverage"] = {"answered": len(clips), "blanks": len(kept), "missing": len(kept) - len(clips),
                       "clips_fingerprint": clips_fingerprint(clips)}
    if not kept.all():
        wrong = {name: np.where(kept, columns[name], 0.0) for name in COMPARED}
        row["missing_as_wrong"] = summarize(wrong, None, **settings)
    return row


def compare_pairs(columns: dict[str, dict], ranked: list[str], common: np.ndarray, settings: dict) -> list[dict]:
    """Every pair of systems (the better-ranked first) on the blanks all answered, for each of `COMPARED`, with the
    p-value after Holm's correction over that metric's pairs."""
    pairs, comparisons = list(combinations(ranked, 2)), []
    for metric in COMPARED if pairs else ():
        scores_a, scores_b = (np.stack([columns[pair[side]][metric][common] for pair in pairs], 1) for side in (0, 1))
        compared = compare_systems(scores_a, scores_b, exact_matches=metric == "exact_match", **settings)
        for pair, comparison, adjusted in zip(pairs, compared, holm([c["p_value"] for c in compared])):
            comparisons.append({"systems": list(pair), "metric": metric, **comparison, "p_value_holm": adjusted,
                                "test": TESTS[metric]})
    return comparisons


def video_gain(columns: dict, control: dict, both: np.ndarray, categories: list[str] | None, settings: dict) -> dict:
    """A system's gain from the video: on the blanks it and its blind control both answered, each of `COMPARED` with
    and without the video and their paired difference (its interval and p-value), overall and by category."""

    def gains(rows: np.ndarray) -> dict:
        found = {"count": int(rows.sum())}
        for metric in COMPARED:
            with_video, without = columns[metric][rows], control[metric][rows]
            compared = compare_systems(with_video, without, exact_matches=metric == "exact_match", **settings)
            found[metric] = {"with_video": mean_std(with_video).mean, "without_video": mean_std(without).mean,
                             "gain": compared["difference"], "gain_ci": compared["difference_ci"],
                             "p_value": compared["p_value"]}
        return found

    categories = None if categories is None else np.array(categories)
    by_category = {} if categories is None else {"by_category": {
        category: gains(both & (categories == category)) for category in sorted(set(categories[both]))}}
    return {**gains(both), **by_category}


def evaluate_systems(systems: list[System], split: Split, settings: dict, with_baselines: bool,
                     controls: dict[str, System] | None = None, release_f1: bool = False) -> dict:
    """results.json: the `dataset`, the `settings` (confidence_level, num_bootstrap, seed), every system's scores,
    coverage, rank and rank interval and, with a blind control in `controls` (system name -> control), its gain from
    the video; how their replies were read; the `comparisons` of every pair on the blanks all answered, with the
    minimum detectable difference; and, `with_baselines`, the most frequent training answer and human agreement."""
    columns = {system.name: score_columns(system, split, release_f1) for system in systems}
    rows = {system.name: system_row(system, columns[system.name], split, settings) for system in systems}
    common = np.logical_and.reduce([np.ones(len(split.keys), bool), *(answered(system, split) for system in systems)])
    means = {name: mean_std(columns[name]["f1"][common]).mean for name in rows}
    ranked = sorted(rows, key=lambda name: -means[name])
    comparisons = compare_pairs(columns, ranked, common, settings)
    holm_f1 = {tuple(c["systems"]): c["p_value_holm"] for c in comparisons if c["metric"] == "f1"}
    intervals = rank_intervals(means, holm_f1)
    for rank, name in enumerate(ranked, start=1):
        rows[name].update(rank=rank, rank_interval=list(intervals[name]))
    for system in systems:
        if (control := (controls or {}).get(system.name)) is not None:
            both = answered(control, split) & answered(system, split)
            rows[system.name]["video_gain"] = {"control": control.file, **video_gain(
                columns[system.name], score_columns(control, split), both, split.categories, settings)}
    results = {
        "dataset": split.dataset,
        "settings": settings,
        "systems": {name: rows[name] for name in ranked},
        "readings_differ": len({json.dumps(s.reading, sort_keys=True) for s in systems if s.reading}) > 1,
        "compared_blanks": int(common.sum()),
        "clips_differ": len({row["coverage"]["clips_fingerprint"] for row in rows.values()}) > 1,
        "minimum_detectable_difference": {metric: minimum_detectable_difference(
            np.array([columns[name][metric][common] for name in ranked]).T) for metric in COMPARED},
        "comparisons": comparisons,
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
            MOST_FREQUENT_ANSWER: {"answer": answer, **summarize(guessed, split.categories, **settings)},
            HUMAN_AGREEMENT: {"num_blanks": len(kept), **summarize(human, categories, **settings)},
        }
    return results
