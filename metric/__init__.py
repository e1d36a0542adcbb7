"""FIBER scoring: the `fiber_metric` evaluate module, its plain functions, the baseline and `push-metric`.

`fiberbench evaluate`, which joins predictions files with a dataset's split, is `fiberbench.metric.evaluate` (its scoring
`fiberbench.metric.scoring`).

The functions are read from `fiber_metric/` (scores.py, statistics.py, agreement.py) on first use (PEP 562):
they import numpy, which `fiberbench push-metric --help` and the other commands that only need `METRIC_PATH`
do without.
Neither they nor `fiberbench evaluate` import `evaluate` (the module's class is in fiber_metric.py).
"""

import importlib
from pathlib import Path

# The folder to pass to `evaluate.load` (its module file is fiber_metric.py, as `evaluate` expects).
METRIC_PATH = Path(__file__).resolve().parent / "fiber_metric"

# The plain functions, by the module of fiber_metric/ that holds them.
_FUNCTIONS = {
    "CorrectAnswers": "scores",
    "average_precision": "scores",
    "correct_at_k": "scores",
    "distinct_candidates": "scores",
    "exact_match": "scores",
    "f1": "scores",
    "normalize_answer": "scores",
    "references_from_columns": "scores",
    "references_from_example": "scores",
    "score_predictions": "scores",
    "bootstrap_means": "statistics",
    "column_means": "statistics",
    "compare_systems": "statistics",
    "confidence_interval": "statistics",
    "mcnemar_p_value": "statistics",
    "mean_std": "statistics",
    "paired_bootstrap_means": "statistics",
    "randomization_p_value": "statistics",
    "human_agreement": "agreement",
}

__all__ = ["METRIC_PATH", *_FUNCTIONS]


def __getattr__(name: str):
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(f".fiber_metric.{_FUNCTIONS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
