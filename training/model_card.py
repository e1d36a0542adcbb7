"""make_model_card: the README.md of a trained FIBER model, with the Hub metadata (datasets, base model, results)."""

import dataclasses
from collections.abc import Mapping
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from fiberbench import CITATION

TASK_TYPE = "text2text-generation"
TASK_NAME = "Video fill-in-the-blanks"
FUSION_DESCRIPTIONS = {
    "none": "none (text only: T5 fine-tuned without the video)",
    "early": "early (projected video features follow the caption's token embeddings through the T5 encoder)",
    "late": "late (a video transformer beside the T5 text encoder, then a fusion transformer over both)",
}
# The training settings every FIBER model card lists, in this order, named as train.py's flags. Both training paths
# fill this one table: train.py from its arguments, `FiberSeq2SeqTrainer` from its `Seq2SeqTrainingArguments`
# (`max_steps`, `warmup_steps` under train.py's names), its processor and its `FiberMetrics`.
CARD_HYPERPARAMETERS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "weight_decay",
    "num_train_epochs",
    "max_train_steps",
    "lr_scheduler_type",
    "num_warmup_steps",
    "seed",
    "single_feature",
    "only_noun_phrases",
    "num_beams",
    "num_processes",
)


@dataclasses.dataclass(frozen=True)
class SavedAt:
    """The point of training a saved model holds, as its card states it.

    Attributes:
        step: optimizer steps trained.
        epoch: epochs trained (with a fraction for a model saved within an epoch).
        validation: its validation scores (`fiber_metric`'s, in percent), or None when it was not validated.
        final: whether it is the run's final model (else a save pushed while training went on).
    """

    step: int
    epoch: float
    validation: Mapping[str, Any] | None = None
    final: bool = True

    def describe(self) -> str:
        """One paragraph of the card: which step and epoch, and the validation score."""
        epochs = f"{self.epoch:.4g} epoch" + ("" if self.epoch == 1 else "s")
        where = f"This model holds the weights after **{self.step} optimizer steps ({epochs})**"
        if self.validation is None:
            score = "it was not evaluated on the validation split"
        else:
            score = (
                f"validation F1 **{self.validation['f1']:.2f}**, exact match {self.validation['exact_match']:.2f}"
            )
        when = (
            "It is the run's final model."
            if self.final
            else "It was pushed while training went on: a later push of the run replaces it."
        )
        return f"{where}; {score}. {when}"


def make_model_card(
    results: Mapping[str, float],
    *,
    base_model: str | None,
    dataset_name: str,
    fusion: str,
    hyperparameters: Mapping[str, Any],
    model_name: str = "fiber-t5",
    dataset_config: str | None = None,
    split: str = "test",
    single_feature: bool = False,
    synthetic: bool = False,
    saved_at: SavedAt | None = None,
) -> str:
    """The model card (README.md text) of a trained FIBER model.

    Args:
        results: metric name to value as the training script reports them (`fiber_metric` scores
            are percentages, e.g. `{"exact_match": 56.2, "f1": 71.4}`); every numeric entry goes
            into the card's `model-index`, so the Hub shows it.
        base_model: the checkpoint training started from (`"t5-base"`, a Hub id or a folder name);
            None for a model trained from scratch, which then has no `base_model` metadata.
        dataset_name: the dataset's Hub id (or local name) the results were computed on.
        fusion: the model's fusion, `"none"`, `"early"` or `"late"`.
        hyperparameters: the training settings to list, by the names of `CARD_HYPERPARAMETERS` (learning rate,
            batch size, epochs, ...); the card lists them in that order.
        model_name: the model's Hub id (or name), shown in the `model-index` and the usage example.
        dataset_config: the dataset config (`"text"`, `"i3d"` or another encoder's features), if any.
        split: the split the results are on.
        single_feature: whether the model saw one feature per clip (the paper's "1f" variants).
        synthetic: whether the data is the bundled SYNTHETIC sample (or built from it): the card
            then says so at the top, tags it `synthetic-data` and its scores say nothing about FIBER.
        saved_at: which step and epoch the model holds, and its validation score (a "Training state"
            section); every card a run pushes has one.

    Returns:
        Markdown that starts with a YAML block (`base_model`, `datasets`, `metrics`, `tags`,
        `model-index`); `ModelCard(text).data` reads it back.
    """
    if fusion not in FUSION_DESCRIPTIONS:
        raise ValueError(f"`fusion` must be one of {tuple(FUSION_DESCRIPTIONS)}, got {fusion!r}.")
    unknown = sorted(set(hyperparameters) - set(CARD_HYPERPARAMETERS))
    if unknown:
        raise ValueError(f"`hyperparameters` has settings a card does not list: {unknown} (see CARD_HYPERPARAMETERS).")
    scores = {name: float(value) for name, value in results.items() if isinstance(value, int | float)}
    eval_results = [
        EvalResult(
            task_type=TASK_TYPE,
            task_name=TASK_NAME,
            dataset_type=dataset_name,
            dataset_name="FIBER",
            dataset_config=dataset_config,
            dataset_split=split,
            metric_type=name,
            metric_name=name.replace("_", " ").capitalize(),
            metric_value=value,
        )
        for name, value in scores.items()
    ]
    features = "I3D" if dataset_config in (None, "i3d") else f"`{dataset_config}`"
    video = f"one {features} feature per clip" if single_feature else f"the clip's {features} features"
    fusion_line = FUSION_DESCRIPTIONS[fusion] + ("" if fusion == "none" else f", reading {video}")
    video_argument = "" if fusion == "none" else ", video_features=[features]"
    origin = f"`{base_model}` fine-tuned" if base_model else "a T5 trained from scratch"
    evaluated_on = f"{split} split" + (f", {dataset_config} config" if dataset_config else "")
    video_tags = [dataset_config or "i3d", f"{fusion}-fusion"]
    tags = ["fiber", "video", "fill-in-the-blanks", "t5"] + ([] if fusion == "none" else video_tags)
    tags += ["synthetic-data"] if synthetic else []
    synthetic_note = (
        "\n**Trained and evaluated on SYNTHETIC data** (the sample bundled with fiberbench, or a dataset built "
        "from it): a demonstration model; its scores say nothing about FIBER.\n"
        if synthetic
        else ""
    )
    card_data = ModelCardData(
        base_model=base_model,
        datasets=[dataset_name],
        language="en",
        library_name="transformers",
        license="apache-2.0",
        metrics=sorted(scores),
        model_name=model_name,
        pipeline_tag=TASK_TYPE,
        tags=tags,
        eval_results=eval_results or None,
    )
    results_table = "\n".join(f"| {name} | {value:.2f} |" for name, value in scores.items())
    results = f"| metric | value |\n|---|---|\n{results_table}" if scores else "Not evaluated yet."
    settings_table = "\n".join(
        f"| {name} | {hyperparameters[name]} |" for name in CARD_HYPERPARAMETERS if name in hyperparameters
    )
    state = f"\n## Training state\n\n{saved_at.describe()}\n" if saved_at is not None else ""
    body = f"""
# {model_name}

A FIBER model: {origin} to fill the blank of a video caption on `{dataset_name}`.
Fusion: {fusion_line}.
{synthetic_note}
The input is the masked caption with its blank `_____` as `<extra_id_0>`; the model generates
`<extra_id_0> answer <extra_id_1>`. Decoding follows the paper: beam search, at most 10 new tokens,
no repeated bigrams, only `</s>` after `<extra_id_1>`, and the first beam that is a noun phrase in
the blank.

## Use

```python
from transformers import AutoModelForSeq2SeqLM, AutoProcessor

model = AutoModelForSeq2SeqLM.from_pretrained("{model_name}", trust_remote_code=True)
processor = AutoProcessor.from_pretrained("{model_name}", trust_remote_code=True)
print(model.fill_blanks(processor, ["A man plays _____ on a stage."]{video_argument}))
```
The noun-phrase choice needs spaCy and an English pipeline (`en_core_web_trf` as in the paper).

## Results ({evaluated_on})

{results}
{state}
## Training

| setting | value |
|---|---|
{settings_table}

## Citation

```bibtex
{CITATION}```
"""
    return str(ModelCard(f"---\n{card_data.to_yaml()}\n---\n{body}"))


__all__ = ["CARD_HYPERPARAMETERS", "SavedAt", "make_model_card"]
