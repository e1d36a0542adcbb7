"""FIBER on `Seq2SeqTrainer`: the paper's decoding in its evaluation, scored through fiber_metric.

    trainer = FiberSeq2SeqTrainer(
        model=model,                                   # a FiberT5ForConditionalGeneration
        args=Seq2SeqTrainingArguments("out", predict_with_generate=True, remove_unused_columns=False, ...),
        train_dataset=FiberExamples(fiber["train"], with_video=True),
        eval_dataset=FiberExamples(fiber["validation"], with_video=True),
        data_collator=FiberDataCollator(processor),
        processing_class=processor,
        compute_metrics=FiberMetrics(processor, fiber["validation"]),
    )

`training/train.py` runs it with the paper's recipe and FIBER's outputs. With `push_to_hub=True` it pushes as the
Trainer does (`hub_strategy`), and every pushed folder loads with `trust_remote_code` (the model's code files and
processor are in each) and has a FIBER model card saying which step and epoch it holds.
"""

import math
import shutil
from pathlib import Path

import torch
from transformers import EvalPrediction, LogitsProcessorList, Seq2SeqTrainer
from transformers.trainer_utils import HubStrategy

from fiberbench.errors import FiberbenchError
from fiberbench.metric import distinct_candidates
from fiberbench.modeling.decoding import EosAfterAnswerLogitsProcessor, choose_noun_phrases
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.outputs import write_text
from fiberbench.training.evaluation import label_probabilities, load_metric, score
from fiberbench.training.model_card import SavedAt, make_model_card

# The Trainer's own arguments that a FIBER model card lists.
CARD_SETTINGS = (
    "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "weight_decay",
    "num_train_epochs", "max_steps", "lr_scheduler_type", "warmup_steps", "seed", "world_size",
)
# What `FiberMetrics` reports to the Trainer at each evaluation (its log, the best model's `metric_for_best_model`).
LOGGED_METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "map", "label_probability")


class FiberSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` whose generation decodes as `fill_blanks` does (paper, App. B.2).

    With `predict_with_generate`, every beam is returned, shaped (examples, beams, tokens), and only `</s>` may
    follow `<extra_id_1>`; the `label_ids` handed to `compute_metrics` are each example's probability of its label
    (`label_probabilities`), for `FiberMetrics`. Examples carry text (`masked_caption`, `label`) that
    `FiberDataCollator` makes into model inputs, so `remove_unused_columns` must be False. A training loss that
    becomes NaN or infinite stops training (`FiberbenchError`).

    Args (besides the Trainer's):
        dataset_name, dataset_config: the data, for the model cards of pushed models.
        synthetic: the data is the bundled SYNTHETIC sample (or built from it): the cards say so.
    """

    def __init__(self, *args, dataset_name="fiber", dataset_config=None, synthetic=False, **kwargs):
        self.dataset_name, self.dataset_config, self.synthetic = dataset_name, dataset_config, synthetic
        super().__init__(*args, **kwargs)
        if self.args.remove_unused_columns:
            raise ValueError(
                "FiberSeq2SeqTrainer needs Seq2SeqTrainingArguments(remove_unused_columns=False): the examples' "
                "masked_caption and label are what FiberDataCollator turns into model inputs."
            )
        # FiberT5's forward takes `labels` through **kwargs, where the Trainer does not look for them.
        self.label_names = ["labels"]

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss):  # one device sync per step, small beside the step
            raise FiberbenchError(
                f"The training loss became {loss.item()} at step {self.state.global_step + 1}; stopping. Lower "
                f"--learning_rate (now {self.args.learning_rate:g}) or check the data."
            )
        return loss

    # Each loader has a generator of its own, so that starting to iterate over it draws nothing from the global RNG:
    # dropout sees the same random numbers whether or not an evaluation ran in between.
    def get_train_dataloader(self):
        return seeded(super().get_train_dataloader(), self.args.seed)

    def get_eval_dataloader(self, eval_dataset=None):
        return seeded(super().get_eval_dataloader(eval_dataset), 0)

    def get_test_dataloader(self, test_dataset):
        return seeded(super().get_test_dataloader(test_dataset), 0)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """`Trainer.save_model`; with `push_to_hub`, also a model card, and the code files in `output_dir`.

        The Trainer pushes `output_dir` at each save with only the weights, configs and processor copied from the
        checkpoint: the code files and this save's card go there first, so that the model pushed at every save
        loads with `trust_remote_code`, as `last-checkpoint/` does.
        """
        super().save_model(output_dir, _internal_call=_internal_call)
        if not (self.args.push_to_hub and self.args.should_save):
            return
        folder, root = Path(output_dir or self.args.output_dir), Path(self.args.output_dir)
        self.write_model_card(folder, final=False)
        if folder.resolve() != root.resolve() and self.args.hub_strategy != HubStrategy.END:
            for code in folder.glob("*.py"):
                shutil.copyfile(code, root / code.name)
            self.write_model_card(root, final=False)

    def create_model_card(self, *args, **kwargs) -> None:
        """The FIBER model card of `push_to_hub` in `output_dir`, in place of the Trainer's own."""
        if self.is_world_process_zero():
            self.write_model_card(Path(self.args.output_dir), final=True)

    def write_model_card(self, folder: Path, *, final: bool, results=None, split="validation") -> None:
        """`folder`/README.md: the model's card, with `results` on `split` (default: the validation scores of the
        step saved), and the step and epoch it holds (the best model's after `load_best_model_at_end`)."""
        step = self.state.global_step
        if final and self.args.load_best_model_at_end and self.state.best_global_step:
            step = self.state.best_global_step
        logged = [record for record in self.state.log_history if record.get("step", 0) <= step]
        scores = next((record for record in reversed(logged) if "eval_f1" in record), None)
        epoch = next((record["epoch"] for record in reversed(logged) if "epoch" in record), self.state.epoch or 0)
        validation = scores and {name: scores[f"eval_{name}"] for name in ("exact_match", "f1")}
        model = self.accelerator.unwrap_model(self.model)
        card = make_model_card(
            validation or {} if results is None else results,
            base_model=model.config.name_or_path or None,
            dataset_name=self.dataset_name,
            dataset_config=self.dataset_config,
            fusion=model.config.fusion,
            hyperparameters={name: getattr(self.args, name) for name in CARD_SETTINGS}
            | {"num_beams": model.generation_config.num_beams},
            model_name=self.args.hub_model_id or Path(self.args.output_dir).name,
            split=split,
            single_feature=self.processing_class.single_feature,
            synthetic=self.synthetic,
            saved_at=SavedAt(step, epoch, validation, final=final),
        )
        write_text(folder / "README.md", card)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        """The loss, every beam of every example (examples, beams, tokens), and each example's label probability."""
        if not self.args.predict_with_generate or prediction_loss_only:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
        inputs = self._prepare_inputs(inputs)
        # Seq2SeqTrainer.evaluate/predict keep their generation arguments in `_gen_kwargs`, which its own
        # prediction_step reads the same way; there is no public accessor.
        gen_kwargs = {**getattr(self, "_gen_kwargs", {}), **gen_kwargs}
        config, processor = self.model.generation_config, self.processing_class
        num_beams = gen_kwargs.pop("num_beams", None) or config.num_beams
        end_rule = EosAfterAnswerLogitsProcessor(processor.answer_end_token_id, processor.tokenizer.eos_token_id)
        with torch.no_grad():
            # `labels` stay out of generate (FiberT5 takes them through **kwargs, which generate refuses).
            generated = self.model.generate(
                **{key: value for key, value in inputs.items() if key != "labels"},
                **{key: value for key, value in gen_kwargs.items() if value is not None},
                num_beams=num_beams,
                num_return_sequences=num_beams,
                logits_processor=LogitsProcessorList([end_rule]),
            )
            with self.compute_loss_context_manager():
                outputs = model(**inputs)
        # Every batch padded to the same length, so that batches concatenate.
        length = (config.max_new_tokens or config.max_length) + 1
        generated = torch.nn.functional.pad(generated, (0, length - generated.shape[-1]), value=config.pad_token_id)
        probabilities = label_probabilities(outputs.logits, inputs["labels"])[:, None]
        return outputs.loss.detach().mean(), generated.reshape(-1, num_beams, length), probabilities


def seeded(loader, seed: int):
    """`loader` (a prepared one: Accelerate's adapter over a DataLoader) iterating with a generator of its own."""
    getattr(loader, "base_dataloader", loader).generator = torch.Generator().manual_seed(seed)
    return loader


class FiberMetrics:
    """`compute_metrics` for `FiberSeq2SeqTrainer`: each example's beams, the paper's choice, fiber_metric's scores.

    Args:
        processor: the model's `FiberProcessor` (decodes the answers).
        split: the evaluation split, in the order the Trainer evaluates it (`eval_dataset`).
        only_noun_phrases: answer with the first beam that is a noun phrase in the blank (paper), else the first.
        nlp: the spaCy pipeline of the noun-phrase check; `load_spacy_pipeline()` when None.

    Returns `LOGGED_METRICS` and `correct_at_1` (EM and F1 in percent, against all answers and the label alone).
    """

    def __init__(self, processor, split, only_noun_phrases: bool = True, nlp=None):
        self.processor, self.split, self.only_noun_phrases = processor, split, only_noun_phrases
        self.nlp = nlp if nlp is not None or not only_noun_phrases else load_spacy_pipeline()
        self.metric = load_metric()

    def outputs(self, prediction: EvalPrediction) -> list[dict]:
        """Each example's `prediction` (the chosen beam), ranked distinct `candidates` and `label_probability`."""
        # Seq2SeqTrainer gathers the processes' predictions with `gather`, keeping at the end the examples repeated to
        # even out the last batch; batches of different lengths are padded with -100.
        sequences = torch.as_tensor(prediction.predictions)
        if len(sequences) < len(self.split):
            raise ValueError(f"Got predictions for {len(sequences)} examples, the split has {len(self.split)}.")
        sequences = sequences[: len(self.split)].masked_fill(sequences[: len(self.split)] < 0, self.processor.tokenizer.pad_token_id)
        beams = [self.processor.decode_answers(row) for row in sequences]
        candidates = [distinct_candidates(ranked) for ranked in beams]
        choices = [distinct or ranked[:1] for distinct, ranked in zip(candidates, beams)]
        captions = list(self.split["masked_caption"])
        answers = choose_noun_phrases(captions, choices, self.nlp) if self.only_noun_phrases else [c[0] for c in choices]
        probabilities = [float(p) for p in torch.as_tensor(prediction.label_ids).reshape(-1)[: len(self.split)]]
        return [
            {"index": i, "prediction": answer, "candidates": ranked, "label_probability": p if math.isfinite(p) else None}
            for i, (answer, ranked, p) in enumerate(zip(answers, candidates, probabilities))
        ]

    def __call__(self, prediction: EvalPrediction) -> dict[str, float]:
        metrics, _ = score(self.metric, self.split, self.outputs(prediction), "validation")
        return {name: metrics[name] for name in LOGGED_METRICS if metrics[name] is not None} | {
            "correct_at_1": metrics["correct_at_k"]["1"]
        }
