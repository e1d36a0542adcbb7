"""Evaluation of a model or baseline on a split: answers, their fiber_metric scores, one record per example."""

import dataclasses
import logging
import math
from typing import Any

import datasets
import evaluate
import torch
from accelerate import Accelerator
from tqdm.auto import tqdm

import fiberbench.metric
from fiberbench.predict.answers import answers_and_candidates
from fiberbench.metric import references_from_example
from fiberbench.modeling import FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.training.inputs import VIDEO_COLUMN, FiberExamples, make_dataloader

logger = logging.getLogger(__name__)

RECORD_COLUMNS = ("video_id", "video_start_time", "video_end_time", "masked_caption", "label")


def load_metric() -> evaluate.EvaluationModule:
    """fiber_metric, kept in memory: every process computes the same scores with no cache files to lock."""
    return evaluate.load(str(fiberbench.metric.METRIC_PATH), keep_in_memory=True)


def label_probabilities(logits: torch.Tensor, labels: torch.Tensor) -> list[float]:
    """P(target | input) of each example: the product of its target tokens' probabilities.

    logits: (batch, target tokens, vocab); labels: (batch, target tokens) with -100 on padding.
    The target is `<extra_id_0> {label} <extra_id_1> </s>`, so this is the probability that the
    model writes exactly the original label, and only it.
    """
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    token_log_probs = log_probs.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    probabilities = token_log_probs.masked_fill(labels == -100, 0.0).sum(dim=-1).exp().tolist()
    if not all(map(math.isfinite, probabilities)):
        # Only non-finite weights give these; JSON has no NaN, so they are reported as unknown.
        logger.warning("The model gives non-finite label probabilities (non-finite weights?): reported as null.")
    return [probability if math.isfinite(probability) else None for probability in probabilities]


@dataclasses.dataclass
class Evaluator:
    """Evaluates a model on a run's evaluation splits, on every process, and scores it with fiber_metric.

    Args:
        accelerator: the run's `Accelerator`; the splits' loaders are prepared with it, so each
            process fills the blanks of its own shard.
        processor: the model's `FiberProcessor`.
        splits: the evaluation splits by name.
        with_video: whether the model reads `video_features`.
        batch_size: examples per process and batch.
        num_beams, only_noun_phrases, nlp: decoding, as in `fill_blanks`.
        num_workers, worker_context: data loader worker processes and how they start (see `make_dataloader`).
    """

    accelerator: Accelerator
    processor: FiberProcessor
    splits: dict[str, datasets.Dataset]
    with_video: bool
    batch_size: int
    num_beams: int
    only_noun_phrases: bool
    nlp: Any  # a spaCy pipeline, or None
    num_workers: int = 0
    worker_context: Any = None  # a multiprocessing context, or None

    def __post_init__(self) -> None:
        self.metric = load_metric()
        self.loaders = {
            name: self.accelerator.prepare(
                make_dataloader(
                    FiberExamples(split, self.with_video),
                    batch_size=self.batch_size,
                    shuffle=False,
                    seed=0,
                    num_workers=self.num_workers,
                    worker_context=self.worker_context,
                )
            )
            for name, split in self.splits.items()
        }

    def __call__(self, model, split_name: str, description: str) -> tuple[dict, list[dict]]:
        """The split's metrics and prediction records (see `score`)."""
        return score(self.metric, self.splits[split_name], self.predict(model, split_name, description), split_name)

    @torch.no_grad()
    def predict(self, model, split_name: str, description: str) -> list[dict]:
        """Every example's answer, ranked candidates and label probability, gathered from all processes.

        The loader yields raw rows (`FiberDataCollator` without a processor), and each process
        fills the blanks of its shard with the model's own `fill_blanks`, the API users call; the
        answers and candidates recorded are `fiberbench.predict.answers`', as `predict` records them.
        `gather_for_metrics` drops the examples repeated to even out the last batch, so every
        example comes back exactly once; the result is in split order.
        """
        accelerator = self.accelerator
        decoder = decoding_model(accelerator, model)
        was_training = decoder.training
        decoder.eval()
        gathered = []
        for batch in tqdm(self.loaders[split_name], desc=description, disable=not accelerator.is_local_main_process):
            captions, video_features = batch["masked_caption"], batch.get(VIDEO_COLUMN)
            inputs = self.processor(captions, video_features=video_features, labels=batch["label"]).to(
                accelerator.device
            )
            with accelerator.autocast():
                logits = decoder(**inputs).logits
            # The model's own beams, the API users call; the answer is chosen among their distinct answers.
            filled = decoder.fill_blanks(
                self.processor,
                captions,
                video_features=video_features,
                num_beams=self.num_beams,
                only_noun_phrases=False,
                return_candidates=True,
                batch_size=len(captions),
            )
            answers, candidates = answers_and_candidates(
                captions, [beams for _, beams in filled], self.nlp if self.only_noun_phrases else None
            )
            local = [
                {"index": index, "prediction": answer, "candidates": ranked, "label_probability": probability}
                for index, answer, ranked, probability in zip(
                    batch["index"].tolist(), answers, candidates, label_probabilities(logits, inputs["labels"])
                )
            ]
            gathered += accelerator.gather_for_metrics(local, use_gather_object=True)
        decoder.train(was_training)
        gathered.sort(key=lambda output: output["index"])
        expected = len(self.splits[split_name])
        if [output["index"] for output in gathered] != list(range(expected)):
            raise RuntimeError(f"{description}: gathered {len(gathered)} predictions for {expected} examples.")
        return gathered


def decoding_model(accelerator, model):
    """The model to evaluate with: `model` unwrapped, or under FSDP a plain copy holding all its weights.

    `generate` runs the encoder outside the model's own forward, where FSDP cannot gather sharded
    weights (on 2 CPU processes with torch 2.13 it fails inside the encoder), and beam search may
    run a different number of steps on each process. The copy is built from the full state dict
    that every process gathers, then generates on its own.
    """
    if not is_sharded(model):
        return accelerator.unwrap_model(model, keep_torch_compile=False)
    return unsharded_copy(model, accelerator.unwrap_model(model).config, accelerator.device)


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether FSDP holds `model`'s weights in shards: FSDP1 modules inside (compiled or not), or DTensors (FSDP2)."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.tensor import DTensor

    return any(isinstance(module, FullyShardedDataParallel) for module in model.modules()) or any(
        isinstance(parameter, DTensor) for parameter in model.parameters()
    )


def unsharded_copy(sharded_model, config, device) -> FiberT5ForConditionalGeneration:
    """A `FiberT5ForConditionalGeneration` with `sharded_model`'s full weights, on `device` (a collective call)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state_dict = get_model_state_dict(sharded_model, options=StateDictOptions(full_state_dict=True))
    copy = FiberT5ForConditionalGeneration(config)
    copy.load_state_dict(state_dict)
    copy.generation_config = sharded_model.generation_config
    return copy.to(device)


def score(
    metric: evaluate.EvaluationModule, split: datasets.Dataset, outputs: list[dict], split_name: str
) -> tuple[dict, list[dict]]:
    """Metrics of a split's `outputs` (from `predict` or a baseline), and one prediction record per example.

    EM and F1 against all correct answers and against the label alone; by category when every
    example has one; Correct@K and MAP over the ranked candidates; the mean label probability
    when the outputs have one (models, not the baseline).
    """
    columns = [column for column in (*RECORD_COLUMNS, "additional_answers", "category") if column in split.column_names]
    rows = split.select_columns(columns).to_list()
    predictions = [output["prediction"] for output in outputs]
    categories = [row.get("category") for row in rows]
    categories = categories if all(isinstance(category, str) for category in categories) else None
    all_answers = metric.compute(
        predictions=predictions,
        references=[references_from_example(row) for row in rows],
        per_example=True,
        categories=categories,
        candidates=[output["candidates"] for output in outputs],
    )
    label_only = metric.compute(
        predictions=predictions,
        references=[references_from_example(row, label_only=True) for row in rows],
        per_example=True,
        categories=categories,
    )
    probabilities = [output.get("label_probability") for output in outputs]
    metrics = {
        "num_examples": len(rows),
        "exact_match": all_answers["exact_match"],
        "f1": all_answers["f1"],
        "exact_match_label_only": label_only["exact_match"],
        "f1_label_only": label_only["f1"],
        "correct_at_k": all_answers["correct_at_k"],
        "map": all_answers["map"],
        "label_probability": math.fsum(probabilities) / len(rows) if rows and None not in probabilities else None,
    }
    if categories is not None:
        metrics["count_by_category"] = all_answers["count_by_category"]
        for name in ("exact_match", "f1"):
            metrics[f"{name}_by_category"] = all_answers[f"{name}_by_category"]
            metrics[f"{name}_label_only_by_category"] = label_only[f"{name}_by_category"]
    records = [
        {
            "split": split_name,
            "index": output["index"],
            **{column: row[column] for column in RECORD_COLUMNS if column in row},
            "category": row.get("category"),
            "prediction": output["prediction"],
            "candidates": output["candidates"],
            "label_probability": output.get("label_probability"),
            "exact_match": all_answers["exact_match_per_example"][position],
            "f1": all_answers["f1_per_example"][position],
            "exact_match_label_only": label_only["exact_match_per_example"][position],
            "f1_label_only": label_only["f1_per_example"][position],
        }
        for position, (row, output) in enumerate(zip(rows, outputs))
    ]
    return metrics, records
