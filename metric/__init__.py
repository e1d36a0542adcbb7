"""FIBER scoring: the `fiber_metric` evaluate module, its plain functions, the baseline and `push-metric`.

`fiberbench evaluate`, which joins predictions files with a dataset's split, is `fiberbench.scoring`.

The functions are read from `fiber_metric/scores.py` on first use (PEP 562): it imports numpy, which
`fiberbench push-metric --help` and the other commands that only need `METRIC_PATH` do without.
Neither they nor `fiberbench evaluate` import `evaluate` (the module's class is in fiber_metric.py).
"""

import importlib
from pathlib import Path

# The folder to pass to `evaluate.load` (its module file is fiber_metric.py, as `evaluate` expects).
METRIC_PATH = Path(__file__).resolve().parent / "fiber_metric"

_FUNCTIONS = (
    "CorrectAnswers",
    "average_precision",
    "bootstrap_means",
    "compare_systems",
    "confidence_interval",
    "correct_at_k",
    "distinct_candidates",
    "exact_match",
    "f1",
    "human_agreement",
    "mcnemar_p_value",
    "mean_std",
    "normalize_answer",
    "paired_bootstrap_means",
    "randomization_p_value",
    "references_from_example",
    "score_predictions",
)

__all__ = ["METRIC_PATH", *_FUNCTIONS]


def __getattr__(name: str):
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(".fiber_metric.scores", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
