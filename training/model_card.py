"""The README.md of a trained FIBER model, from the template model_card.md: what it is, the data it saw (SYNTHETIC
included), its scores as Hub metadata (`model-index`), its training settings and the step it holds."""

from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from fiberbench import CITATION
from fiberbench.outputs import write_text

TEMPLATE = Path(__file__).with_suffix(".md")
FUSIONS = {
    "none": "none (text only: T5 fine-tuned without the video)",
    "early": "early (projected video features follow the caption's token embeddings through the T5 encoder)",
    "late": "late (a video transformer beside the T5 text encoder, then a fusion transformer over both)",
}
CARD_METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "map")
CARD_SETTINGS = ("per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "weight_decay",
                 "num_train_epochs", "max_steps", "lr_scheduler_type", "warmup_steps", "seed", "world_size")


def write_model_card(trainer, folder: Path, *, final: bool, results: dict | None = None, split="validation") -> None:
    """`folder`/README.md: the card of `trainer`'s model (a `FiberSeq2SeqTrainer`'s), with `results` on `split`
    (default: the validation scores of the step it holds, the best model's after `load_best_model_at_end`)."""
    args, state, model = trainer.args, trainer.state, trainer.accelerator.unwrap_model(trainer.model)
    step = state.best_global_step if final and args.load_best_model_at_end and state.best_global_step else state.global_step
    logged = [record for record in state.log_history if record.get("step", 0) <= step]
    validation = next(({key[5:]: value for key, value in record.items() if key.startswith("eval_")}
                       for record in reversed(logged) if "eval_f1" in record), None)
    scores = {key: float(value) for key, value in ((validation or {}) if results is None else results).items()
              if key in CARD_METRICS and value is not None}
    fusion, dataset, config = model.config.fusion, trainer.dataset_name, trainer.dataset_config
    features = "I3D" if config in (None, "i3d") else f"`{config}`"
    if fusion != "none":
        clip = f"one {features} feature per clip" if trainer.processing_class.single_feature else f"the clip's {features} features"
        features = f", reading {clip}"
    name = args.hub_model_id or Path(args.output_dir).name
    card_data = ModelCardData(
        base_model=model.config.name_or_path or None, datasets=[dataset], language="en", license="apache-2.0",
        library_name="transformers", metrics=sorted(scores), model_name=name, pipeline_tag="text2text-generation",
        tags=["fiber", "video", "fill-in-the-blanks", "t5"] + [config or "i3d", f"{fusion}-fusion"] * (fusion != "none")
        + ["synthetic-data"] * trainer.synthetic,
        eval_results=[
            EvalResult(task_type="text2text-generation", task_name="Video fill-in-the-blanks", dataset_type=dataset,
                       dataset_name="FIBER", dataset_config=config, dataset_split=split, metric_type=key,
                       metric_name=key.replace("_", " ").capitalize(), metric_value=value)
            for key, value in scores.items()
        ] or None,
    )
    card = ModelCard.from_template(
        card_data, template_path=TEMPLATE, model_name=name, base_model=model.config.name_or_path, dataset_name=dataset,
        dataset_config=config, synthetic=trainer.synthetic, split=split, scores=scores, validation=validation,
        fusion=FUSIONS[fusion] + ("" if fusion == "none" else features), final=final, citation=CITATION,
        video_argument="" if fusion == "none" else ", video_features=[features]", step=step,
        epoch=next((record["epoch"] for record in reversed(logged) if "epoch" in record), state.epoch or 0),
        settings={key: getattr(getattr(args, key), "value", getattr(args, key)) for key in CARD_SETTINGS} | {"num_beams": model.generation_config.num_beams},
    )
    write_text(folder / "README.md", str(card))
