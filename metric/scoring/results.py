"""The scores of every system and baseline on a split: means, bootstrap confidence intervals, scores by category and
paired comparisons, all through the metric's own functions (results.json's `systems`, `baselines`, `comparisons`).

Each interval and p-value depends only on its own per-blank scores and the seed, so each equals what
`evaluate.load("metric/fiber_metric").compute` (or the metric's plain functions) gives for the same inputs.
"""

import json
from itertools import combinations

from fiberbench.metric.scoring.split import Split, System

MOST_FREQUENT_ANSWER, HUMAN_AGREEMENT = "most frequent answer", "human agreement"


def _nest(values: dict) -> dict:
    """{"f1": x, ("correct_at_k", "1"): y} -> {"f1": x, "correct_at_k": {"1": y}}."""
    nested = {}
    for name, value in values.items():
        if isinstance(name, tuple):
            nested.setdefault(name[0], {})[name[1]] = value
        else:
            nested[name] = value
    return nested



def score_columns(system: System, split: Split) -> dict:
    """The per-blank scores behind every mean of the system's leaderboard row, by name (percent), as arrays."""
    import numpy as np

    all_answers = split.answers.score(system.predictions, system.candidates)
    label_only = split.labels.score(system.predictions)
    columns = {
        "exact_match": all_answers["exact_match"],
        "f1": all_answers["f1"],
        "exact_match_label_only": label_only["exact_match"],
        "f1_label_only": label_only["f1"],
    }
    if system.candidates is not None:
        columns.update({("correct_at_k", k): column for k, column in all_answers["correct_at_k"].items()})
        columns["map"] = all_answers["average_precision"]
    return {name: np.asarray(column, dtype=float) for name, column in columns.items()}


def _means_and_intervals(rows: dict[str, dict], blanks, settings: dict) -> dict[str, dict]:
    """Each row's means over `blanks` (an index array; None: every blank) and their confidence intervals."""
    import numpy as np

    from fiberbench.metric import column_means, confidence_interval

    names = [(row, name) for row, columns in rows.items() for name in columns]
    matrix = np.stack([rows[row][name] if blanks is None else rows[row][name][blanks] for row, name in names], axis=1)
    bounds = confidence_interval(matrix, **settings).reshape(-1, 2)
    results = {row: ({}, {}) for row in rows}
    for (row, name), mean, (low, high) in zip(names, column_means(matrix).tolist(), bounds):
        means, intervals = results[row]
        means[name], intervals[name] = mean, [float(low), float(high)]
    return {
        row: {**_nest(means), "confidence_intervals": _nest(intervals)} for row, (means, intervals) in results.items()
    }


def score_rows(rows: dict[str, dict], split: Split, blanks, settings: dict, progress) -> dict:
    """Each leaderboard row's means, confidence intervals and scores by category, over `blanks` of the split.

    `rows` maps a row to its per-blank columns; `blanks` is an index array (None: every blank).
    Each interval depends only on its own scores and the seed, so it is the one
    `compute(..., confidence_level=...)` gives for that row alone (a category's, for its blanks).
    """
    import numpy as np

    results = _means_and_intervals(rows, blanks, settings)
    progress.update()
    if split.categories is None:
        return results
    kept = np.arange(len(split)) if blanks is None else np.asarray(blanks)
    categories = np.asarray(split.categories, dtype=object)[kept]
    for category in sorted(set(categories)):
        in_category = kept[categories == category]
        em_f1 = {row: {name: columns[name] for name in ("exact_match", "f1")} for row, columns in rows.items()}
        for row, scores in _means_and_intervals(em_f1, in_category, settings).items():
            results[row].setdefault("by_category", {})[category] = {"count": len(in_category), **scores}
        progress.update()
    return results


def compare_pairs(rows: dict[str, dict], ranked: list[str], settings: dict) -> list[dict]:
    """Every pair of systems (the better-ranked first) on F1 and EM, as `compare_systems` compares one pair."""
    import numpy as np

    from fiberbench.metric import compare_systems, mcnemar_p_value

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



def evaluate_systems(systems: list[System], split: Split, settings: dict, train_labels: list[str] | None) -> dict:
    """The `systems` and `comparisons` of results.json, and its `baselines` given the training labels."""
    from tqdm.auto import tqdm

    from fiberbench.metric.baselines import most_frequent_answer

    with tqdm(systems, desc="Scoring") as progress:  # closed before an error is printed, so it starts a line
        rows = {system.name: score_columns(system, split) for system in progress}
    num_categories = len(set(split.categories)) if split.categories else 0
    with tqdm(total=(1 + num_categories) * (1 if train_labels is None else 2) + 1, desc="Bootstrap") as progress:
        if train_labels is not None:
            answer = most_frequent_answer(train_labels)
            baseline = System(MOST_FREQUENT_ANSWER, "", [answer] * len(split), None)
            rows[MOST_FREQUENT_ANSWER] = score_columns(baseline, split)
        scored = score_rows(rows, split, None, settings, progress)
        ranked = sorted((system.name for system in systems), key=lambda name: -scored[name]["f1"])
        results = {
            "systems": {
                system.name: {
                    "file": system.file,
                    "reading": system.reading,
                    "correct_at_k": None,
                    "map": None,
                    **scored[system.name],
                }
                for system in systems
            },
            "readings_differ": len({json.dumps(s.reading, sort_keys=True) for s in systems if s.reading}) > 1,
            "comparisons": compare_pairs(rows, ranked, settings),
        }
        progress.update()
        if train_labels is not None:
            human_columns, human_blanks = split.human_agreement
            (human,) = score_rows({HUMAN_AGREEMENT: human_columns}, split, human_blanks, settings, progress).values()
            results["baselines"] = {
                MOST_FREQUENT_ANSWER: {"answer": answer, **scored[MOST_FREQUENT_ANSWER]},
                HUMAN_AGREEMENT: {"num_blanks": len(human_blanks), **human},
            }
    return results


