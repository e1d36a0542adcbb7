"""FIBER with `Seq2SeqTrainer`: the paper's decoding in its evaluation, scored through fiber_metric.

    from transformers import Seq2SeqTrainingArguments
    from fiberbench.training.inputs import FiberDataCollator, FiberExamples
    from fiberbench.training.trainer import FiberMetrics, FiberSeq2SeqTrainer

    trainer = FiberSeq2SeqTrainer(
        model=model,                                   # a FiberT5ForConditionalGeneration
        args=Seq2SeqTrainingArguments("out", predict_with_generate=True, remove_unused_columns=False, ...),
        train_dataset=FiberExamples(fiber["train"], with_video=True),
        eval_dataset=FiberExamples(fiber["validation"], with_video=True),
        data_collator=FiberDataCollator(processor),    # batched feature reads, picklable for workers
        processing_class=processor,
        compute_metrics=FiberMetrics(processor, fiber["validation"]),
    )

`training/train.py` is the reference run (per-epoch best model, checkpoints, results files); this
is the same model, data and scoring for people whose tooling is built around the Trainer. With
`push_to_hub=True` it pushes as the Trainer does (`hub_strategy`, e.g. "checkpoint" for a resumable
`last-checkpoint/`), and every pushed folder loads with `trust_remote_code` (the model's code and
processor are in each) and has a FIBER model card saying which step and epoch it holds.
"""

import shutil
from pathlib import Path

import torch
from transformers import EvalPrediction, LogitsProcessorList, Seq2SeqTrainer
from transformers.trainer_utils import HubStrategy

from fiberbench.predict.answers import answers_and_candidates
from fiberbench.files import write_text
from fiberbench.metric import references_from_example
from fiberbench.modeling.decoding import EosAfterAnswerLogitsProcessor
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.ownership import OutputLock, acquire_on_main
from fiberbench.training.evaluation import load_metric
from fiberbench.training.model_card import CARD_HYPERPARAMETERS, SavedAt, make_model_card

# The card's headline scores, as FiberMetrics names them.
CARD_METRICS = ("exact_match", "f1", "correct_at_1", "map")


class FiberSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` whose generation decodes as `fill_blanks` does (paper, App. B.2).

    With `predict_with_generate`, every beam is returned and only `</s>` may follow `<extra_id_1>`;
    predictions come out shaped (examples, beams, tokens) for `FiberMetrics` to choose the first
    beam that is a noun phrase. The examples carry text (`masked_caption`, `label`) that
    `FiberDataCollator` turns into model inputs, so `remove_unused_columns` must be False.

    Args (besides the Trainer's):
        dataset_name: the dataset's Hub id (or name) for the model cards of pushed models.
        synthetic: the data is the bundled SYNTHETIC sample (or built from it): the cards say so.
    """

    def __init__(self, *args, dataset_name: str = "fiber", synthetic: bool = False, **kwargs):
        self.dataset_name = dataset_name
        self.synthetic = synthetic
        super().__init__(*args, **kwargs)
        if self.args.remove_unused_columns:
            raise ValueError(
                "FiberSeq2SeqTrainer needs Seq2SeqTrainingArguments(remove_unused_columns=False): the examples' "
                "masked_caption and label are what FiberDataCollator turns into model inputs."
            )
        # FiberT5's forward takes `labels` through **kwargs, where the Trainer does not look for them.
        self.label_names = ["labels"]

    def train(self, *args, **kwargs):
        """`Trainer.train`, holding the lock of `output_dir` (`fiberbench.ownership`) on the main process.

        A `training/train.py` run or another trainer writing the same folder, however its path is
        spelt, is refused in one line naming it. What is in the folder stays the Trainer's to
        manage (its `checkpoint-N` folders, `resume_from_checkpoint`), as transformers documents.
        """
        lock = OutputLock(self.args.output_dir, "FiberSeq2SeqTrainer", "output_dir")
        acquire_on_main(lock, self.accelerator)
        try:
            return super().train(*args, **kwargs)
        finally:
            lock.release()

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """`Trainer.save_model`; with `push_to_hub`, also what each pushed folder needs beyond the weights.

        The Trainer saves a checkpoint with `save_pretrained` (which writes FIBER's code files) and
        then pushes `output_dir` with only the weights, configs and processor copied from it: the
        code files and this save's card go to `output_dir` first, so that the model pushed there
        loads with `trust_remote_code` at every save, as `last-checkpoint/` does.
        """
        super().save_model(output_dir, _internal_call=_internal_call)
        if not (self.args.push_to_hub and self.args.should_save):
            return
        folder = Path(output_dir or self.args.output_dir)
        root = Path(self.args.output_dir)
        self.write_model_card(folder, final=False)
        if folder.resolve() != root.resolve() and self.args.hub_strategy != HubStrategy.END:
            for code in folder.glob("*.py"):
                shutil.copyfile(code, root / code.name)
            self.write_model_card(root, final=False)

    def create_model_card(self, *args, **kwargs) -> None:
        """The FIBER model card of the final push (`push_to_hub`) in `output_dir`, in place of the Trainer's own."""
        if self.is_world_process_zero():
            self.write_model_card(Path(self.args.output_dir), final=True)

    def write_model_card(self, folder: Path, *, final: bool) -> None:
        """`folder`/README.md: a FIBER model card with the latest validation scores and the step and epoch saved."""
        step = self.state.global_step
        if final and self.args.load_best_model_at_end and self.state.best_global_step:
            step = self.state.best_global_step
        logged = [record for record in self.state.log_history if record.get("step", 0) <= step]
        scores = next((record for record in reversed(logged) if "eval_f1" in record), None)
        epoch = next((record["epoch"] for record in reversed(logged) if "epoch" in record), self.state.epoch or 0)
        validation = None
        if scores is not None:
            validation = {name: scores[f"eval_{name}"] for name in CARD_METRICS if f"eval_{name}" in scores}
        model = self.accelerator.unwrap_model(self.model)
        card = make_model_card(
            validation or {},
            base_model=model.config.name_or_path or None,
            dataset_name=self.dataset_name,
            fusion=model.config.fusion,
            hyperparameters=self.card_hyperparameters(model),
            model_name=self.hub_model_id or self.args.hub_model_id or Path(self.args.output_dir).name,
            split="validation",
            single_feature=self.processing_class.single_feature,
            synthetic=self.synthetic,
            saved_at=SavedAt(step, epoch, validation, final=final),
        )
        write_text(folder / "README.md", card)

    def card_hyperparameters(self, model) -> dict:
        """The card's training settings (`CARD_HYPERPARAMETERS`, train.py's names), from the training arguments, the
        model's generation config, the processor and `FiberMetrics` (only_noun_phrases: when it is the
        `compute_metrics`)."""
        args = self.args
        values = {
            "max_train_steps": args.max_steps if args.max_steps > 0 else None,
            "num_warmup_steps": args.warmup_steps,
            "single_feature": self.processing_class.single_feature,
            "num_beams": args.generation_num_beams or model.generation_config.num_beams,
            "num_processes": args.world_size,
        }
        if isinstance(self.compute_metrics, FiberMetrics):
            values["only_noun_phrases"] = self.compute_metrics.only_noun_phrases
        return {
            name: values[name] if name in values else getattr(args, name)
            for name in CARD_HYPERPARAMETERS
            if name in values or hasattr(args, name)
        }

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        """The loss, and every beam of every example, (examples, beams, tokens), padded to the longest answer."""
        if not self.args.predict_with_generate or prediction_loss_only:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
        inputs = self._prepare_inputs(inputs)
        # Seq2SeqTrainer.evaluate/predict keep their generation arguments in `_gen_kwargs`, which its
        # own prediction_step reads the same way; there is no public accessor.
        gen_kwargs = {**getattr(self, "_gen_kwargs", {}), **gen_kwargs}
        generation_config = self.model.generation_config
        num_beams = gen_kwargs.get("num_beams") or generation_config.num_beams
        processor = self.processing_class
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
            loss = None
            if "labels" in inputs:
                with self.compute_loss_context_manager():
                    loss = model(**inputs).loss.detach().mean()
        # Every batch padded to the same length, so that batches concatenate: (examples, beams, tokens).
        length = (generation_config.max_new_tokens or generation_config.max_length) + 1
        generated = torch.nn.functional.pad(
            generated, (0, length - generated.shape[-1]), value=processor.tokenizer.pad_token_id
        )
        return loss, generated.reshape(-1, num_beams, length), inputs.get("labels")


class FiberMetrics:
    """`compute_metrics` for `FiberSeq2SeqTrainer`: each example's beams, the paper's choice, fiber_metric's scores.

    Args:
        processor: the model's `FiberProcessor` (decodes the answers).
        split: the evaluation split, in the order the Trainer evaluates it (`eval_dataset`).
        only_noun_phrases: answer with the first beam that is a noun phrase in the blank (paper),
            else the first beam.
        nlp: the spaCy pipeline of the noun-phrase check; `load_spacy_pipeline()` when None.

    Returns EM and F1 against all correct answers, Correct@1 and MAP over the beams, in percent.
    """

    def __init__(self, processor, split, only_noun_phrases: bool = True, nlp=None):
        self.processor = processor
        self.masked_captions = list(split["masked_caption"])
        self.references = [references_from_example(row) for row in split]
        self.only_noun_phrases = only_noun_phrases
        self.nlp = nlp if nlp is not None or not only_noun_phrases else load_spacy_pipeline()
        self.metric = load_metric()

    def __call__(self, prediction: EvalPrediction) -> dict[str, float]:
        sequences = torch.as_tensor(prediction.predictions)
        if len(sequences) != len(self.references):
            raise ValueError(f"Got predictions for {len(sequences)} examples, the split has {len(self.references)}.")
        # Predictions gathered from batches of different lengths are padded with -100.
        sequences = sequences.masked_fill(sequences < 0, self.processor.tokenizer.pad_token_id)
        beams = [self.processor.decode_answers(row) for row in sequences]
        answers, candidates = answers_and_candidates(
            self.masked_captions, beams, self.nlp if self.only_noun_phrases else None
        )
        scores = self.metric.compute(predictions=answers, references=self.references, candidates=candidates)
        return {
            "exact_match": scores["exact_match"],
            "f1": scores["f1"],
            "correct_at_1": scores["correct_at_k"]["1"],
            "map": scores["map"],
        }
