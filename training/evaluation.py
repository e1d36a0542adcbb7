"""Scoring a split's answers with fiber_metric: results.json's metrics and predictions.jsonl's records."""

import math

import datasets
import evaluate
import torch

import fiberbench.metric
from fiberbench.metric import references_from_example

RECORD_COLUMNS = ("video_id", "video_start_time", "video_end_time", "masked_caption", "label")


def load_metric() -> evaluate.EvaluationModule:
    """fiber_metric, kept in memory: every process computes the same scores with no cache files to lock."""
    return evaluate.load(str(fiberbench.metric.METRIC_PATH), keep_in_memory=True)


def label_probabilities(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """P(target | input) of each example, (batch,): the product of its target tokens' probabilities.

    logits: (batch, target tokens, vocab); labels: (batch, target tokens), -100 on padding. The target is
    `<extra_id_0> {label} <extra_id_1> </s>`: the probability that the model writes the label, and only it.
    """
    log_probs = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return log_probs.masked_fill(labels == -100, 0.0).sum(dim=-1).exp()


def score(
    metric: evaluate.EvaluationModule, split: datasets.Dataset, outputs: list[dict], split_name: str
) -> tuple[dict, list[dict]]:
    """The metrics of a split's `outputs` (each `index`, `prediction`, `candidates` and optionally
    `label_probability`), and one prediction record per example.

    EM and F1 against all correct answers and against the label alone, by category when every example has one,
    Correct@K and MAP over the ranked candidates, the mean label probability when every output has one.
    """
    columns = [column for column in (*RECORD_COLUMNS, "additional_answers", "category") if column in split.column_names]
    rows = split.select_columns(columns).to_list()
    predictions = [output["prediction"] for output in outputs]
    categories = [row.get("category") for row in rows]
    categories = categories if all(isinstance(category, str) for category in categories) else None
    scores = {
        "": metric.compute(
            predictions=predictions,
            references=[references_from_example(row) for row in rows],
            per_example=True,
            categories=categories,
            candidates=[output["candidates"] for output in outputs],
        ),
        "_label_only": metric.compute(
            predictions=predictions,
            references=[references_from_example(row, label_only=True) for row in rows],
            per_example=True,
            categories=categories,
        ),
    }
    probabilities = [output.get("label_probability") for output in outputs]
    known = rows and all(probability is not None and math.isfinite(probability) for probability in probabilities)
    metrics = {"num_examples": len(rows)}
    for suffix, computed in scores.items():
        metrics |= {f"exact_match{suffix}": computed["exact_match"], f"f1{suffix}": computed["f1"]}
    metrics |= {
        "correct_at_k": scores[""]["correct_at_k"],
        "map": scores[""]["map"],
        "label_probability": math.fsum(probabilities) / len(rows) if known else None,
    }
    if categories is not None:
        metrics["count_by_category"] = scores[""]["count_by_category"]
        for name in ("exact_match", "f1"):
            for suffix, computed in scores.items():
                metrics[f"{name}{suffix}_by_category"] = computed[f"{name}_by_category"]
    records = [
        {
            "split": split_name,
            "index": output["index"],
            **{column: row[column] for column in RECORD_COLUMNS if column in row},
            "category": row.get("category"),
            "prediction": output["prediction"],
            "candidates": output["candidates"],
            "label_probability": output.get("label_probability"),
            **{f"{name}{suffix}": computed[f"{name}_per_example"][position]
               for suffix, computed in scores.items() for name in ("exact_match", "f1")},
        }
        for position, (row, output) in enumerate(zip(rows, outputs))
    ]
    return metrics, records
