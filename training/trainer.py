"""FIBER on `Seq2SeqTrainer` (docs/training.md): a split as its dataset and collator, the paper's decoding in its
evaluation, scored through fiber_metric, and model cards (the template model_card.md) saying what the model saw."""

import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import datasets
import numpy as np
import torch
from huggingface_hub import EvalResult, ModelCard, ModelCardData
from transformers import EvalPrediction, LogitsProcessorList, Seq2SeqTrainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from fiberbench import CITATION
from fiberbench.errors import FiberbenchError
from fiberbench.metric import distinct_candidates
from fiberbench.modeling.decoding import EosAfterAnswerLogitsProcessor, choose_noun_phrases
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.outputs import write_text
from fiberbench.training.evaluation import label_probabilities, load_metric, score

VIDEO_COLUMN = "video_features"


class FiberExamples(torch.utils.data.Dataset):
    """A FIBER split as a dataset of `index`, `masked_caption`, `label` (and `video_features`, (frames, size)), whose
    batches' features are one Arrow read (10x faster than row by row, 2.5x than NumPy formatting: bench/train.py)."""

    def __init__(self, split: datasets.Dataset, with_video: bool):
        self.masked_captions = list(split["masked_caption"])
        self.labels = list(split["label"])
        self.videos = split.select_columns([VIDEO_COLUMN]).with_format("arrow") if with_video else None

    def __len__(self) -> int:
        return len(self.masked_captions)

    def __getitem__(self, index: int) -> dict:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict]:
        indices = [int(index) for index in indices]
        examples = [{"index": i, "masked_caption": self.masked_captions[i], "label": self.labels[i]} for i in indices]
        if self.videos is not None:
            # An Array2D column (None, size) is a list (frames) of lists (features): flattened twice, every float of
            # the batch is one buffer, cut back into clips by the frame counts.
            clips = self.videos[indices].column(VIDEO_COLUMN).combine_chunks().storage
            counts = clips.value_lengths().to_numpy()
            frames = clips.flatten().flatten().to_numpy(zero_copy_only=False, writable=True).reshape(counts.sum(), -1)
            for example, clip in zip(examples, np.split(frames, np.cumsum(counts)[:-1])):
                example[VIDEO_COLUMN] = clip
        return examples


class FiberDataCollator:
    """Examples (of `FiberExamples`) to the model's inputs, `labels` included, with the model's `FiberProcessor`;
    picklable, for DataLoader workers (`--dataloader_num_workers`)."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, examples: list[dict]) -> dict:
        video = [example[VIDEO_COLUMN] for example in examples] if VIDEO_COLUMN in examples[0] else None
        captions, labels = zip(*((example["masked_caption"], example["label"]) for example in examples))
        return dict(self.processor(list(captions), video_features=video, labels=list(labels)))


CARD_TEMPLATE = Path(__file__).with_name("model_card.md")
CARD_METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "map")


class FiberSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` evaluating as `fill_blanks` decodes (App. B.2: every beam, (examples, beams, tokens); label_ids
    the label's probability), stopping on a NaN loss; what it pushes loads with `trust_remote_code` and has a FIBER
    card (`dataset_name`, `dataset_config`, `synthetic`). Needs `remove_unused_columns=False`."""

    def __init__(self, *args, dataset_name="fiber", dataset_config=None, synthetic=False, **kwargs):
        self.dataset_name, self.dataset_config, self.synthetic = dataset_name, dataset_config, synthetic
        super().__init__(*args, **kwargs)
        if self.args.remove_unused_columns:
            raise ValueError("FiberSeq2SeqTrainer needs Seq2SeqTrainingArguments(remove_unused_columns=False): the "
                             "examples' masked_caption and label are what FiberDataCollator makes into model inputs.")
        self.label_names = ["labels"]  # FiberT5 takes them through **kwargs, where the Trainer does not look
        if self.args.push_to_hub:
            self.add_callback(PushedFolder(self))

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss):  # one device sync per step, small beside the step
            raise FiberbenchError(f"The training loss became {loss.item()} at step {self.state.global_step + 1}: "
                                  f"stopping; lower --learning_rate ({self.args.learning_rate:g}) or check the data")
        return loss

    # Each loader has a generator of its own: starting to iterate draws nothing from the global RNG, so that dropout
    # sees the same random numbers whether or not an evaluation ran in between.
    def get_train_dataloader(self):
        return seeded(super().get_train_dataloader(), self.args.seed)

    def get_eval_dataloader(self, eval_dataset=None):
        return seeded(super().get_eval_dataloader(eval_dataset), 0)

    def get_test_dataloader(self, test_dataset):
        return seeded(super().get_test_dataloader(test_dataset), 0)

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
    getattr(loader, "base_dataloader", loader).generator = torch.Generator().manual_seed(seed)
    return loader


class FiberMetrics:
    """`compute_metrics` on `split`: each example's beams, the first that is a noun phrase in the blank (the paper;
    with `only_noun_phrases`, by `nlp`, default `load_spacy_pipeline()`) else the first, scored by fiber_metric."""

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
        firsts = [ranked[0] for ranked in choices]
        answers = choose_noun_phrases(captions, choices, self.nlp) if self.only_noun_phrases else firsts
        probabilities = torch.as_tensor(prediction.label_ids).reshape(-1)[:size].tolist()
        return [{"index": i, "prediction": answer, "candidates": ranked, "label_probability": p if math.isfinite(p)
                 else None} for i, (answer, ranked, p) in enumerate(zip(answers, candidates, probabilities))]

    def __call__(self, prediction: EvalPrediction) -> dict[str, float]:
        metrics, _ = score(self.metric, self.split, self.outputs(prediction), "validation")
        return {key: value for key, value in metrics.items() if isinstance(value, float)} | {  # the Trainer logs them
            "correct_at_1": metrics["correct_at_k"]["1"]}


class PushedFolder(TrainerCallback):
    """The code files and a card in `output_dir` as the Trainer starts a push at a save (it pushes that folder with
    only the weights, configs and processor of the checkpoint): written then, never while an upload reads them."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_push_begin(self, args, state, control, **kwargs):
        root = Path(args.output_dir)
        for code in (root / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}").glob("*.py"):
            shutil.copyfile(code, root / code.name)
        write_model_card(self.trainer, root, final=False)


def write_model_card(trainer, folder: Path, *, final: bool, results: dict | None = None, split="validation") -> None:
    """`folder`/README.md: the card of `trainer`'s model (a `FiberSeq2SeqTrainer`'s), with `results` on `split`
    (default: the validation scores of the step it holds, the best model's after `load_best_model_at_end`)."""
    args, state, model = trainer.args, trainer.state, trainer.accelerator.unwrap_model(trainer.model)
    step = state.best_global_step if final and args.load_best_model_at_end and state.best_global_step else \
        state.global_step
    logged = [record for record in state.log_history if record.get("step", 0) <= step]
    validation = next(({key[5:]: value for key, value in record.items() if key.startswith("eval_")}
                       for record in reversed(logged) if "eval_f1" in record), None)
    scores = {key: float(value) for key, value in ((validation or {}) if results is None else results).items()
              if key in CARD_METRICS and value is not None}
    fusion, dataset, config = model.config.fusion, trainer.dataset_name, trainer.dataset_config
    name = args.hub_model_id or Path(args.output_dir).name
    card_data = ModelCardData(
        base_model=model.config.name_or_path or None, datasets=[dataset], language="en", license="apache-2.0",
        library_name="transformers", metrics=sorted(scores), model_name=name, pipeline_tag="text2text-generation",
        tags=["fiber", "video", "fill-in-the-blanks", "t5"] + [config or "i3d", f"{fusion}-fusion"] * (fusion != "none")
        + ["synthetic-data"] * trainer.synthetic,
        eval_results=[EvalResult(task_type="text2text-generation", task_name="Video fill-in-the-blanks",
                                 metric_type=key, metric_name=key.replace("_", " ").capitalize(), metric_value=value,
                                 dataset_type=dataset, dataset_name="FIBER", dataset_config=config, dataset_split=split)
                      for key, value in scores.items()] or None,
    )
    card = ModelCard.from_template(
        card_data, template_path=CARD_TEMPLATE, model_name=name, base_model=model.config.name_or_path, fusion=fusion,
        dataset_name=dataset, dataset_config=config, features="I3D" if config in (None, "i3d") else f"`{config}`",
        single_feature=trainer.processing_class.single_feature, synthetic=trainer.synthetic, split=split, step=step,
        epoch=next((record["epoch"] for record in reversed(logged) if "epoch" in record), state.epoch or 0),
        scores=scores, validation=validation, final=final, citation=CITATION, args=args,
        num_beams=model.generation_config.num_beams,
    )
    write_text(folder / "README.md", str(card))
