"""Scoring a split with fiber_metric, the label probability, and the batches the training data loader makes."""

import math

import datasets
import pytest
import torch
from transformers import AutoTokenizer

from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor
from fiberbench.training.evaluation import label_probabilities, load_metric, score
from fiberbench.training.inputs import load_splits, make_dataloader


@pytest.fixture(scope="module")
def split():
    return datasets.Dataset.from_list(
        [
            {
                "video_id": "a",
                "masked_caption": "_____ plays.",
                "label": "A man",
                "additional_answers": [["a guy"], ["a person"]],
                "category": "Person",
            },
            {
                "video_id": "b",
                "masked_caption": "He rides _____.",
                "label": "a horse",
                "additional_answers": [["a pony"]],
                "category": "Animal",
            },
            {
                "video_id": "c",
                "masked_caption": "She eats _____.",
                "label": "a red apple",
                "additional_answers": [["fruit"]],
                "category": "Animal",
            },
        ]
    )


def test_label_probability_is_the_product_of_the_target_tokens_probabilities():
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]], [[0.2, 0.2, 0.6], [1 / 3, 1 / 3, 1 / 3]]]))
    labels = torch.tensor([[0, 1], [2, -100]])
    assert label_probabilities(logits, labels) == pytest.approx([0.5 * 0.8, 0.6])


def test_score_against_all_answers_and_the_label_alone(split):
    outputs = [
        {"index": 0, "prediction": "a guy", "candidates": ["a guy", "a man"], "label_probability": 0.5},
        {"index": 1, "prediction": "a horse", "candidates": ["a horse"], "label_probability": 0.25},
        {"index": 2, "prediction": "an apple", "candidates": ["an apple", "fruit"], "label_probability": 0.0},
    ]
    metrics, records = score(load_metric(), split, outputs, "validation")
    assert metrics["num_examples"] == 3
    assert metrics["exact_match"] == pytest.approx(200 / 3)
    assert metrics["exact_match_label_only"] == pytest.approx(100 / 3)
    # "an apple" against "a red apple": token sets {apple} and {red, apple}, F1 2/3.
    assert metrics["f1_label_only"] == pytest.approx(100 * (0 + 1 + 2 / 3) / 3)
    assert metrics["f1_by_category"] == {"Animal": pytest.approx(100 * (1 + 2 / 3) / 2), "Person": 100.0}
    assert metrics["exact_match_label_only_by_category"] == {"Animal": 50.0, "Person": 0.0}
    assert metrics["correct_at_k"]["1"] == pytest.approx(200 / 3) and metrics["correct_at_k"]["2"] == 100.0
    assert metrics["label_probability"] == pytest.approx(0.25)
    assert [record["exact_match"] for record in records] == [100, 100, 0]  # percent, as the means
    assert records[2]["f1_label_only"] == pytest.approx(200 / 3)
    assert records[0] | {"f1": 0} == {
        "split": "validation",
        "index": 0,
        "video_id": "a",
        "masked_caption": "_____ plays.",
        "label": "A man",
        "category": "Person",
        "prediction": "a guy",
        "candidates": ["a guy", "a man"],
        "label_probability": 0.5,
        "exact_match": 100,
        "f1": 0,
        "exact_match_label_only": 0,
        "f1_label_only": 0.0,
    }


def test_score_without_categories_or_probabilities(split):
    outputs = [{"index": i, "prediction": "a man", "candidates": ["a man"]} for i in range(3)]
    metrics, _ = score(load_metric(), split.remove_columns("category"), outputs, "test")
    assert "f1_by_category" not in metrics and metrics["label_probability"] is None
    assert math.isclose(metrics["exact_match"], 100 / 3)


def test_a_fusion_model_on_a_config_without_video_fails_at_once():
    with pytest.raises(ValueError, match="--fusion late needs video features.*--dataset_config_name i3d"):
        load_splits(None, "text", "late")


def test_training_batches_hold_model_inputs_and_row_indices():
    splits = load_splits(None, "i3d", "early")
    processor = FiberProcessor(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH))
    loader = make_dataloader(splits["train"], with_video=True, batch_size=5, shuffle=False, seed=0, processor=processor)
    batch = next(iter(loader))
    assert batch["index"].tolist() == [0, 1, 2, 3, 4]
    assert batch["video_features"].shape[0] == 5 and batch["video_features"].shape[2] == 1024
    assert batch["video_attention_mask"].sum(dim=1).tolist() == [
        len(clip) for clip in splits["train"][:5]["video_features"]
    ]
    assert (batch["labels"] == -100).any() or batch["labels"].shape[0] == 5
    raw = next(iter(make_dataloader(splits["validation"], with_video=False, batch_size=2, shuffle=False, seed=0)))
    assert raw["masked_caption"] == splits["validation"][:2]["masked_caption"] and "video_features" not in raw
