"""FIBER scoring: the `fiber_metric` evaluate module, its plain functions, and the scoring commands."""

import importlib
from pathlib import Path

# The folder to pass to `evaluate.load` (its module file is fiber_metric.py, as `evaluate` expects).
METRIC_PATH = Path(__file__).resolve().parent / "fiber_metric"

__all__ = [
    "METRIC_PATH",
    "average_precision",
    "correct_at_k",
    "exact_match",
    "f1",
    "human_agreement",
    "mean_std",
    "normalize_answer",
    "references_from_example",
    "score_predictions",
]


def __getattr__(name: str):
    """The plain functions of fiber_metric.py, imported on first use.

    That module imports `evaluate` (seconds), which `fiberbench evaluate --help` and the other
    commands of this package must not wait for.
    """
    if name in __all__:
        return getattr(importlib.import_module(".fiber_metric.fiber_metric", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
