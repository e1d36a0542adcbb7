"""FIBER scoring: the `fiber_metric` evaluate module and its plain functions."""

from pathlib import Path

from .fiber_metric.fiber_metric import (
    average_precision,
    correct_at_k,
    exact_match,
    f1,
    human_agreement,
    normalize_answer,
    references_from_example,
    score_predictions,
)

# The folder to pass to `evaluate.load` (its module file is fiber_metric.py, as `evaluate` expects).
METRIC_PATH = Path(__file__).resolve().parent / "fiber_metric"

__all__ = [
    "METRIC_PATH",
    "average_precision",
    "correct_at_k",
    "exact_match",
    "f1",
    "human_agreement",
    "normalize_answer",
    "references_from_example",
    "score_predictions",
]
