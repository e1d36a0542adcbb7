"""FIBER on `Seq2SeqTrainer`: the paper's decoding in its evaluation, scored through fiber_metric (docs/training.md)."""

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
from fiberbench.training.evaluation import label_probabilities, load_metric, score
from fiberbench.training.model_card import write_model_card

# What `FiberMetrics` reports at each evaluation (the Trainer's log; `metric_for_best_model` picks one).
LOGGED_METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "map", "label_probability")


class FiberSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` whose evaluation decodes as `fill_blanks` does (paper, App. B.2): every beam, shaped
    (examples, beams, tokens), only `</s>` after `<extra_id_1>`; the `label_ids` handed to `compute_metrics` are each
    example's probability of its label, for `FiberMetrics`. Needs `remove_unused_columns=False`: `FiberDataCollator`
    makes the examples' text into the model's inputs. A training loss that becomes NaN or infinite stops training.

    With `push_to_hub`, every pushed folder loads with `trust_remote_code` and has a FIBER model card saying which
    step it holds; `dataset_name`, `dataset_config` and `synthetic` (the data is the bundled SYNTHETIC sample, or
    built from it) fill the cards.
    """

    def __init__(self, *args, dataset_name="fiber", dataset_config=None, synthetic=False, **kwargs):
        self.dataset_name, self.dataset_config, self.synthetic = dataset_name, dataset_config, synthetic
        super().__init__(*args, **kwargs)
        if self.args.remove_unused_columns:
            raise ValueError("FiberSeq2SeqTrainer needs Seq2SeqTrainingArguments(remove_unused_columns=False): the "
                             "examples' masked_caption and label are what FiberDataCollator makes into model inputs.")
        self.label_names = ["labels"]  # FiberT5 takes them through **kwargs, where the Trainer does not look

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss):  # one device sync per step, small beside the step
            raise FiberbenchError(f"The training loss became {loss.item()} at step {self.state.global_step + 1}; "
                                  f"stopping. Lower --learning_rate (now {self.args.learning_rate:g}) or check the data.")
        return loss

    # Each loader has a generator of its own: starting to iterate draws nothing from the global RNG, so that dropout
    # sees the same random numbers whether or not an evaluation ran in between.
    def get_train_dataloader(self):
        return seeded(super().get_train_dataloader(), self.args.seed)

    def get_eval_dataloader(self, eval_dataset=None):
        return seeded(super().get_eval_dataloader(eval_dataset), 0)

    def get_test_dataloader(self, test_dataset):
        return seeded(super().get_test_dataloader(test_dataset), 0)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """`Trainer.save_model`; when pushing, with a card, and with the code files in `output_dir`, which the Trainer
        pushes at each save with only the weights, configs and processor of the checkpoint."""
        super().save_model(output_dir, _internal_call=_internal_call)
        if self.args.push_to_hub and self.args.should_save:
            folder, root = Path(output_dir or self.args.output_dir), Path(self.args.output_dir)
            write_model_card(self, folder, final=False)
            if folder.resolve() != root.resolve() and self.args.hub_strategy != HubStrategy.END:
                for code in folder.glob("*.py"):
                    shutil.copyfile(code, root / code.name)
                write_model_card(self, root, final=False)

    def create_model_card(self, *args, **kwargs) -> None:
        """The FIBER model card of `push_to_hub`, in place of the Trainer's own."""
        if self.is_world_process_zero():
            write_model_card(self, Path(self.args.output_dir), final=True)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        """The loss, every beam of every example (examples, beams, tokens), and each example's label probability."""
        if not self.args.predict_with_generate or prediction_loss_only:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
        inputs = self._prepare_inputs(inputs)
        # Seq2SeqTrainer.evaluate/predict keep their generation arguments in `_gen_kwargs`, which its own
        # prediction_step reads the same way; there is no public accessor.
        gen_kwargs = {key: value for key, value in {**getattr(self, "_gen_kwargs", {}), **gen_kwargs}.items() if value}
        config, processor = self.model.generation_config, self.processing_class
        num_beams = gen_kwargs.pop("num_beams", config.num_beams)
        end_rule = EosAfterAnswerLogitsProcessor(processor.answer_end_token_id, processor.tokenizer.eos_token_id)
        with torch.no_grad():
            generated = self.model.generate(  # `labels` stay out: generate refuses what FiberT5 takes by **kwargs
                **{key: value for key, value in inputs.items() if key != "labels"}, **gen_kwargs, num_beams=num_beams,
                num_return_sequences=num_beams, logits_processor=LogitsProcessorList([end_rule]),
            )
            with self.compute_loss_context_manager():
                outputs = model(**inputs)
        length = (config.max_new_tokens or config.max_length) + 1  # every batch as long, so that batches concatenate
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
    """

    def __init__(self, processor, split, only_noun_phrases: bool = True, nlp=None):
        self.processor, self.split, self.only_noun_phrases = processor, split, only_noun_phrases
        self.nlp = nlp if nlp is not None or not only_noun_phrases else load_spacy_pipeline()
        self.metric = load_metric()

    def outputs(self, prediction: EvalPrediction) -> list[dict]:
        """Each example's answer (`prediction`), ranked distinct `candidates` and `label_probability`."""
        # Seq2SeqTrainer gathers with `gather`, keeping at the end the examples repeated to even out the processes'
        # last batches; batches of different lengths are padded with -100.
        size = len(self.split)
        sequences = torch.as_tensor(prediction.predictions)[:size]
        if len(sequences) < size:
            raise ValueError(f"Got predictions for {len(sequences)} examples, the split has {size}.")
        sequences = sequences.masked_fill(sequences < 0, self.processor.tokenizer.pad_token_id)
        beams = [self.processor.decode_answers(row) for row in sequences]
        candidates = [distinct_candidates(ranked) for ranked in beams]
        choices = [distinct or ranked[:1] for distinct, ranked in zip(candidates, beams)]
        captions = list(self.split["masked_caption"])
        answers = choose_noun_phrases(captions, choices, self.nlp) if self.only_noun_phrases else [c[0] for c in choices]
        probabilities = torch.as_tensor(prediction.label_ids).reshape(-1)[:size].tolist()
        return [{"index": i, "prediction": answer, "candidates": ranked, "label_probability": p if math.isfinite(p) else None}
                for i, (answer, ranked, p) in enumerate(zip(answers, candidates, probabilities))]

    def __call__(self, prediction: EvalPrediction) -> dict[str, float]:
        metrics, _ = score(self.metric, self.split, self.outputs(prediction), "validation")
        return {key: metrics[key] for key in LOGGED_METRICS if metrics[key] is not None} | {
            "correct_at_1": metrics["correct_at_k"]["1"]}
