"""make_model_card: a README whose YAML carries the datasets, base model, tags and results."""

import pytest
from huggingface_hub import ModelCard

from fiberbench.training.model_card import SavedAt, make_model_card


def test_the_card_carries_the_hub_metadata_and_results():
    text = make_model_card(
        {"exact_match": 56.2, "f1": 71.4, "f1_by_category": {"person": 70.0}},
        base_model="t5-base",
        dataset_name="org/fiber",
        fusion="early",
        hyperparameters={"learning_rate": 1e-4, "per_device_train_batch_size": 64},
        model_name="org/fiber-t5-i3d",
        dataset_config="i3d",
    )
    card = ModelCard(text)
    assert card.data.base_model == "t5-base"
    assert card.data.datasets == ["org/fiber"]
    assert {"fiber", "video", "i3d", "early-fusion"} <= set(card.data.tags)
    results = {(result.metric_type, result.metric_value) for result in card.data.eval_results}
    assert results == {("exact_match", 56.2), ("f1", 71.4)}
    assert {result.dataset_split for result in card.data.eval_results} == {"test"}
    assert card.data.eval_results[0].dataset_config == "i3d"
    assert 'from_pretrained("org/fiber-t5-i3d", trust_remote_code=True)' in card.text
    assert "| learning_rate | 0.0001 |" in card.text


def test_a_text_only_card_has_no_video_tags():
    text = make_model_card(
        {"f1": 70.9}, base_model="google/t5-v1_1-base", dataset_name="fiber", fusion="none", hyperparameters={}
    )
    card = ModelCard(text)
    assert "i3d" not in card.data.tags and "video_features" not in card.text


def test_an_unknown_fusion_fails():
    with pytest.raises(ValueError, match="`fusion` must be one of"):
        make_model_card({}, base_model="t5-base", dataset_name="fiber", fusion="middle", hyperparameters={})


def test_a_model_trained_from_scratch_has_no_base_model():
    card = ModelCard(
        make_model_card({"f1": 90.0}, base_model=None, dataset_name="fiber", fusion="early", hyperparameters={})
    )
    assert card.data.base_model is None
    assert "trained from scratch" in card.text


def test_the_card_says_which_step_and_epoch_it_holds_and_its_validation_score():
    def card(saved_at):
        return make_model_card(
            {}, base_model=None, dataset_name="fiber", fusion="early", hyperparameters={}, saved_at=saved_at
        )

    pushed = card(SavedAt(step=30, epoch=1.2, validation={"f1": 23.456, "exact_match": 10.0}, final=False))
    assert "after **30 optimizer steps (1.2 epochs)**; validation F1 **23.46**, exact match 10.00" in pushed
    assert "pushed while training went on" in pushed and "Not evaluated yet." in pushed
    final = card(SavedAt(step=50, epoch=2))
    assert "after **50 optimizer steps (2 epochs)**; it was not evaluated on the validation split" in final
    assert "It is the run's final model." in final
