"""Scoring a split's answers with fiber_metric: results.json's metrics, predictions.jsonl's records, the table."""

import math

import datasets
import evaluate
import torch

import fiberbench.metric
from fiberbench.metric import references_from_example

RECORD_COLUMNS = ("video_id", "video_start_time", "video_end_time", "masked_caption", "label")
TABLE_COLUMNS = {"EM": "exact_match", "F1": "f1", "EM label": "exact_match_label_only", "F1 label": "f1_label_only",
                 "C@1": "correct_at_1", "MAP": "map", "P(label)": "label_probability"}


def load_metric() -> evaluate.EvaluationModule:
    """fiber_metric, kept in memory: every process computes the same scores with no cache files to lock."""
    return evaluate.load(str(fiberbench.metric.METRIC_PATH), keep_in_memory=True)


def label_probabilities(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """P(target | input), (batch,), from logits (batch, tokens, vocab) and labels (batch, tokens; -100 on padding): the
    probability that the model writes `<extra_id_0> {label} <extra_id_1> </s>`, the label and only it."""
    log_probs = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return log_probs.masked_fill(labels == -100, 0.0).sum(dim=-1).exp()


def score(metric, split: datasets.Dataset, outputs: list[dict], split_name: str) -> tuple[dict, list[dict]]:
    """The metrics of a split's `outputs` (`index`, `prediction`, `candidates`, `label_probability`) and a record per
    example: EM, F1 (all answers; label alone; by category), Correct@K and MAP, the mean label probability."""
    columns = [column for column in (*RECORD_COLUMNS, "additional_answers", "category") if column in split.column_names]
    rows = split.select_columns(columns).to_list()
    categories = [row.get("category") for row in rows]
    categories = categories if all(isinstance(category, str) for category in categories) else None
    options = {"predictions": [out["prediction"] for out in outputs], "per_example": True, "categories": categories}
    scores = {
        "": metric.compute(**options, references=[references_from_example(row) for row in rows],
                           candidates=[output["candidates"] for output in outputs]),
        "_label_only": metric.compute(**options, references=[references_from_example(row, True) for row in rows]),
    }
    probabilities = [output.get("label_probability") for output in outputs]
    metrics = {"num_examples": len(rows)} | {f"{name}{suffix}": computed[name] for suffix, computed in scores.items()
                                             for name in ("exact_match", "f1")}
    metrics |= {"correct_at_k": scores[""]["correct_at_k"], "map": scores[""]["map"], "label_probability": (
        math.fsum(probabilities) / len(rows) if rows and None not in probabilities else None)}
    if categories is not None:
        metrics["count_by_category"] = scores[""]["count_by_category"]
        metrics |= {f"{name}{suffix}_by_category": computed[f"{name}_by_category"]
                    for name in ("exact_match", "f1") for suffix, computed in scores.items()}
    records = [
        {"split": split_name, "index": output["index"], **{key: row[key] for key in RECORD_COLUMNS if key in row},
         "category": row.get("category"), "prediction": output["prediction"], "candidates": output["candidates"],
         "label_probability": output.get("label_probability")}
        | {f"{name}{suffix}": computed[f"{name}_per_example"][position]
           for suffix, computed in scores.items() for name in ("exact_match", "f1")}
        for position, (row, output) in enumerate(zip(rows, outputs))
    ]
    return metrics, records


def results_table(title: str, results: dict) -> str:
    """A Markdown table of results.json's evaluated splits, one row each (EM/F1 in %, P(label) in 0-1)."""
    rows = [["split", "n", *TABLE_COLUMNS]] + [[split, str(results[split]["num_examples"])] + [
        "-" if value is None else f"{value:.3f}" if key == "label_probability" else f"{value:.1f}"
        for key, value in ((key, results[split]["correct_at_k"]["1"] if key == "correct_at_1" else results[split][key])
                           for key in TABLE_COLUMNS.values())] for split in ("validation", "test") if split in results]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    return "\n".join([title, lines[0], "|" + "|".join("-" * (width + 2) for width in widths) + "|", *lines[1:]])
