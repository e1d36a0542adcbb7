"""FIBER scoring: the `fiber_metric` evaluate module, its plain functions (given here without importing `evaluate`),
and beside them the scoring of systems: `fiberbench evaluate` (`evaluate`) and `push-metric` (`push`)."""

from pathlib import Path

from .fiber_metric.agreement import human_agreement
from .fiber_metric.scores import (annotators_from_example, average_precision, correct_at_k, distinct_candidates,
                                  exact_match, f1, f1_release, normalize_answer, references_from_example,
                                  score_predictions, summarize, vqa_accuracy)
from .fiber_metric.statistics import (bootstrap_means, compare_systems, confidence_interval, holm, mcnemar_p_value,
                                      mean_std, minimum_detectable_difference, paired_bootstrap_means, rank_intervals,
                                      sign_flip_p_value)

# The folder to pass to `evaluate.load` (its module file is fiber_metric.py, as `evaluate` expects).
METRIC_PATH = Path(__file__).resolve().parent / "fiber_metric"
