"""make_model_card: the README.md of a trained FIBER model, with the Hub metadata (datasets, base model, results)."""

import dataclasses
from collections.abc import Mapping
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from fiberbench import CITATION

TASK_TYPE = "text2text-generation"
FUSIONS = {
    "none": "none (text only: T5 fine-tuned without the video)",
    "early": "early (projected video features follow the caption's token embeddings through the T5 encoder)",
    "late": "late (a video transformer beside the T5 text encoder, then a fusion transformer over both)",
}


@dataclasses.dataclass(frozen=True)
class SavedAt:
    """The point of training a saved model holds: optimizer `step`, `epoch`, its `validation` scores (fiber_metric's,
    in percent; None when not validated), and whether it is the run's `final` model or a save pushed while training
    went on."""

    step: int
    epoch: float
    validation: Mapping[str, Any] | None = None
    final: bool = True

    def describe(self) -> str:
        epochs = f"{self.epoch:.4g} epoch" + ("" if self.epoch == 1 else "s")
        score = "it was not evaluated on the validation split" if self.validation is None else (
            f"validation F1 **{self.validation['f1']:.2f}**, exact match {self.validation['exact_match']:.2f}"
        )
        when = "It is the run's final model." if self.final else (
            "It was pushed while training went on: a later push of the run replaces it."
        )
        return f"This model holds the weights after **{self.step} optimizer steps ({epochs})**; {score}. {when}"


def make_model_card(
    results: Mapping[str, Any],
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

    `results`' numbers (fiber_metric's, in percent) go into the card's `model-index`, on `split`; `base_model` is
    the checkpoint training started from (None: trained from scratch); `hyperparameters` are listed in a table, in
    their order; `synthetic` says the data is the bundled SYNTHETIC sample (or built from it): the card says so at
    the top and is tagged `synthetic-data`; `saved_at` adds which step and epoch the model holds. Raises ValueError
    for an unknown `fusion`. `ModelCard(text).data` reads the YAML metadata back.
    """
    if fusion not in FUSIONS:
        raise ValueError(f"`fusion` must be one of {tuple(FUSIONS)}, got {fusion!r}.")
    scores = {name: float(value) for name, value in results.items() if isinstance(value, int | float)}
    features = "I3D" if dataset_config in (None, "i3d") else f"`{dataset_config}`"
    video = f"one {features} feature per clip" if single_feature else f"the clip's {features} features"
    tags = ["fiber", "video", "fill-in-the-blanks", "t5"]
    tags += [] if fusion == "none" else [dataset_config or "i3d", f"{fusion}-fusion"]
    tags += ["synthetic-data"] if synthetic else []
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
        eval_results=[
            EvalResult(
                task_type=TASK_TYPE,
                task_name="Video fill-in-the-blanks",
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
        or None,
    )
    synthetic_note = (
        "\n**Trained and evaluated on SYNTHETIC data** (the sample bundled with fiberbench, or a dataset built from "
        "it): a demonstration model; its scores say nothing about FIBER.\n" if synthetic else ""
    )
    table = "\n".join(f"| {name} | {value:.2f} |" for name, value in scores.items())
    settings = "\n".join(f"| {name} | {value} |" for name, value in hyperparameters.items())
    state = f"\n## Training state\n\n{saved_at.describe()}\n" if saved_at is not None else ""
    body = f"""
# {model_name}

A FIBER model: {f"`{base_model}` fine-tuned" if base_model else "a T5 trained from scratch"} to fill the blank of a
video caption on `{dataset_name}`. Fusion: {FUSIONS[fusion] + ("" if fusion == "none" else f", reading {video}")}.
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
print(model.fill_blanks(processor, ["A man plays _____ on a stage."]{"" if fusion == "none" else ", video_features=[features]"}))
```
The noun-phrase choice needs spaCy and an English pipeline (`en_core_web_trf` as in the paper).

## Results ({split} split{f", {dataset_config} config" if dataset_config else ""})

{f"| metric | value |{chr(10)}|---|---|{chr(10)}{table}" if scores else "Not evaluated yet."}
{state}
## Training

| setting | value |
|---|---|
{settings}

## Citation

```bibtex
{CITATION}```
"""
    return str(ModelCard(f"---\n{card_data.to_yaml()}\n---\n{body}"))
