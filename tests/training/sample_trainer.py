"""The sample demo's tiny model trained with `FiberSeq2SeqTrainer`, as the Trainer path's tests build it.

Imported by tests/training/test_trainer.py, and by the Hub test's training script, which runs in a
process of its own with this folder on its path (tests/hub/test_trainer_push.py).
"""

from pathlib import Path

from transformers import AutoTokenizer, Seq2SeqTrainingArguments

from fiberbench.data import load_sample
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG, read_config
from fiberbench.training.inputs import FiberDataCollator, FiberExamples
from fiberbench.training.trainer import FiberMetrics, FiberSeq2SeqTrainer

DEMO = read_config(SAMPLE_DEMO_CONFIG)


def sample_demo_trainer(
    output_dir: str | Path, metrics: dict | None = None, trainer: dict | None = None, **arguments
) -> FiberSeq2SeqTrainer:
    """A `FiberSeq2SeqTrainer` of the sample demo's early-fusion model (a fresh one, from its config) on the
    sample's i3d config: the demo's batch sizes and learning rate, validation after each epoch, on the CPU, seeded.

    `arguments` add to or replace the `Seq2SeqTrainingArguments`; `metrics` are `FiberMetrics` options and
    `trainer` the trainer's own (`dataset_name`, `synthetic`).
    """
    fiber = load_sample("i3d")
    processor = FiberProcessor(AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH))
    config = build_tiny_config(processor.tokenizer, "early")
    config.update_from_string(DEMO["config_overrides"])
    settings = {
        "per_device_train_batch_size": DEMO["per_device_train_batch_size"],
        "per_device_eval_batch_size": DEMO["per_device_eval_batch_size"],
        "learning_rate": DEMO["learning_rate"],
        "eval_strategy": "epoch",
        "predict_with_generate": True,
        "remove_unused_columns": False,
        "report_to": [],
        "use_cpu": True,
        "seed": 0,
    }
    return FiberSeq2SeqTrainer(
        model=FiberT5ForConditionalGeneration(config),
        args=Seq2SeqTrainingArguments(output_dir=str(output_dir), **(settings | arguments)),
        train_dataset=FiberExamples(fiber["train"], with_video=True),
        eval_dataset=FiberExamples(fiber["validation"], with_video=True),
        data_collator=FiberDataCollator(processor),
        processing_class=processor,
        compute_metrics=FiberMetrics(processor, fiber["validation"], **(metrics or {})),
        **(trainer or {}),
    )
