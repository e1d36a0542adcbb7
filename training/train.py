"""Train and evaluate a FIBER model, or run a baseline, with `Seq2SeqTrainer` (paper §4-5, App. B)."""

import json
import logging
import math
import os
import sys
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import datasets
import torch
import transformers
from huggingface_hub import snapshot_download
from torch.serialization import get_unsafe_globals_in_checkpoint
from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoProcessor, AutoTokenizer, TrainerCallback
from transformers.trainer_callback import ExportableState

from fiberbench.cli import configure_logging
from fiberbench.data import SAMPLE_DIR, load_fiber
from fiberbench.data.loading import check_dataset_name
from fiberbench.data.provenance import is_synthetic
from fiberbench.errors import DataError, UsageError, alike_on_every_process, run_reporting_errors
from fiberbench.hub import check_can_push, hub_problem, is_hub_id, push_folder
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.models import model_loading_options
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5Config, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.outputs import RUNNING, check_output, finish_output, output_lock, start_output, write_json, write_jsonl
from fiberbench.training.arguments import PROG, parse_args, training_settings
from fiberbench.training.evaluation import load_metric, results_table, score
from fiberbench.training.trainer import VIDEO_COLUMN, FiberDataCollator, FiberExamples, FiberMetrics
from fiberbench.training.trainer import FiberSeq2SeqTrainer, write_model_card

logger = logging.getLogger("fiberbench.training.train")

COMMAND = "training/train.py"
# The Trainer's resume loads its pickles (rng_state*.pth, optimizer.pt, scheduler.pt, scaler.pt) weights-only, the RNG
# states allowing NumPy's arrays (transformers' `safe_globals`); its training_args.bin is never loaded.
SAFE_GLOBALS = {"numpy._core.multiarray._reconstruct", "numpy.core.multiarray._reconstruct", "numpy.ndarray",
                "numpy.dtype", "numpy.dtypes.UInt32DType"}
NOT_PICKLES = {".json", ".safetensors", ".md", ".txt", ".py"}


class RunRecord(TrainerCallback, ExportableState):
    """The run's settings in checkpoints (trainer_state.json), for resumes; the record updated at each save."""

    def __init__(self, settings: dict, output_dir: str | None = None, record: dict | None = None):
        self.settings, self.output_dir, self.record = settings, output_dir, record

    def state(self) -> dict:
        return {"args": {"settings": self.settings}, "attributes": {}}

    def on_save(self, args, state, control, **kwargs):
        if self.record:  # the main process's
            finish_output(self.output_dir, self.record, state=RUNNING)


def main(argv: list | None = None) -> int:  # the exit status: 1 for a data error, 2 for a usage error, one line each
    return run_reporting_errors(lambda: train(argv), prog=PROG)


def train(argv: list | None) -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
        # Without it, `accelerate launch --multi_gpu` on a machine without GPUs starts independent one-process runs.
        os.environ.setdefault("ACCELERATE_USE_CPU", "1")
    with alike_on_every_process():
        model_args, data_args, args = parse_args(argv)
        name, resume = model_args.model_name_or_path, args.resume_from_checkpoint
        if not (args.do_eval or args.do_predict or args.do_train and not model_args.baseline):
            raise UsageError("Nothing to do: --do_eval and --do_predict are false, and there is no model to train.")
        if name and (model_args.baseline or model_args.config_overrides):
            raise UsageError("--baseline and --config_overrides build no model from --model_name_or_path; drop it.")
        if args.push_to_hub and (model_args.baseline or not args.do_train):
            raise UsageError("--push_to_hub pushes the model this run trains: it needs --do_train, no --baseline.")
        if args.push_to_hub:
            check_can_push(args.hub_model_id or Path(args.output_dir).resolve().name, args.hub_token)
        here = resume is not None and Path(resume).resolve().parent == Path(args.output_dir).resolve()
        inputs = [path for path in (data_args.dataset_name or SAMPLE_DIR, name, model_args.config) if path]
        previous = check_output(args.output_dir, command=COMMAND, flag="--output_dir", folder=True, resume=here,
                                overwrite=args.overwrite_output_dir, inputs=[i for i in inputs if Path(i).exists()])
        # The names a user may mistype, before any log line: a typo is the one line the run prints.
        if data_args.dataset_name:
            check_dataset_name(data_args.dataset_name)
        options = model_loading_options(name, flag="--model_name_or_path") if name and not Path(name).is_dir() else {}
        checkpoint = checkpoint_folder(resume, args.hub_token) if resume else None
    configure_logging()
    if args.disable_tqdm:
        transformers.utils.logging.disable_progress_bar()
        datasets.disable_progress_bars()
    synthetic = is_synthetic(data_args.dataset_name)
    logger.info(describe(model_args, data_args, args, synthetic))
    logger.info(f"Process {args.process_index} of {args.world_size} on {args.device}")
    with alike_on_every_process():
        base = AutoConfig.from_pretrained(name, **options) if name else None
        base = base if isinstance(base, FiberT5Config) else None
        fusion = "none" if model_args.baseline else model_args.fusion or (base.fusion if base else "early")
        if data_args.dataset_config_name is None:
            data_args.dataset_config_name = "text" if fusion == "none" else base.video_features_name if base else "i3d"
        evaluated = [split for split, wanted in (("validation", args.do_eval), ("test", args.do_predict)) if wanted]
        splits = load_splits(data_args, fusion, ["train"] * (args.do_train or bool(model_args.baseline)) + evaluated)
        if args.do_train:  # one epoch of warm-up (the paper), unless --warmup_steps says otherwise
            batches = math.ceil(len(splits["train"]) / (args.per_device_train_batch_size * args.world_size))
            args.warmup_steps = args.warmup_steps or math.ceil(batches / args.gradient_accumulation_steps)
        settings = training_settings(model_args, data_args, args)
        if checkpoint is not None:
            check_checkpoint(checkpoint, settings, args.trust_checkpoint)
        trainer, nlp = None, None
        if not model_args.baseline:
            transformers.set_seed(args.seed)  # before the model's weights are drawn
            model, processor = build_model(model_args, data_args, splits, fusion, options, base)
            nlp = load_spacy_pipeline(model_args.spacy_model) if model_args.only_noun_phrases else None
    with output_lock(args.output_dir, "--output_dir") if args.should_save else nullcontext():
        record = None
        if args.should_save:  # checked again: another run may have written the folder while this one loaded
            previous = check_output(args.output_dir, command=COMMAND, flag="--output_dir", folder=True, resume=here,
                                    overwrite=args.overwrite_output_dir)
            record = start_output(args.output_dir, COMMAND, previous, folder=True, resume=here)
        results = {"synthetic": synthetic, "dataset_name": data_args.dataset_name or "bundled sample",
                   "dataset_config_name": data_args.dataset_config_name, "fusion": fusion, "resumed_from": resume,
                   "num_processes": args.world_size,
                   "arguments": asdict(model_args) | asdict(data_args) | args.to_dict()}
        if model_args.baseline:
            results["answer"] = answer = most_frequent_answer(list(splits["train"]["label"]))
            outputs = {split: [{"index": i, "prediction": answer, "candidates": [answer]}
                               for i in range(len(splits[split]))] for split in evaluated}
        else:
            def scorer(split):
                return FiberMetrics(processor, splits[split], model_args.only_noun_phrases, nlp)

            drawn = torch.random.get_rng_state()
            trainer = FiberSeq2SeqTrainer(
                model=model, args=args, data_collator=FiberDataCollator(processor), processing_class=processor,
                train_dataset=FiberExamples(splits["train"], fusion != "none") if args.do_train else None,
                eval_dataset=FiberExamples(splits["validation"], fusion != "none") if args.do_eval else None,
                compute_metrics=scorer("validation") if args.do_eval else None,
                callbacks=[RunRecord(settings, args.output_dir, record)], synthetic=synthetic,
                dataset_name=data_args.dataset_name or "fiberbench-bundled-sample",
                dataset_config=data_args.dataset_config_name,
            )
            # The Trainer seeds the RNG again as it starts: dropout draws on from where the weights left it, so that
            # --seed gives the run it always gave.
            torch.random.set_rng_state(drawn)
            if args.do_train:
                trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
                # An internal save: the Trainer would push `output_dir` after a save of ours (model/ goes at the end).
                trainer.save_model(str(Path(args.output_dir) / "model"), _internal_call=True)
            trainer.compute_metrics = None  # each split is scored below, against its own answers
            outputs = {split: scorer(split).outputs(trainer.predict(FiberExamples(splits[split], fusion != "none"),
                                                                    metric_key_prefix=split)) for split in evaluated}
        if args.should_save:
            write_outputs(args, results, splits, outputs, record, trainer, nlp)


def describe(model_args, data_args, args, synthetic: bool) -> str:
    """The first log line: what is trained (or run) on what, and whether the data is SYNTHETIC."""
    what = f"the {model_args.baseline.replace('_', '-')} baseline" if model_args.baseline else \
        model_args.model_name_or_path or "a tiny model built from the tokenizer shipped with the package"
    if model_args.model_name_or_path is None and data_args.dataset_name is None:
        return (f"Main job: no --model_name_or_path and no --dataset_name given, so {what} on the bundled SYNTHETIC "
                f"sample, offline, with the settings of training/configs/sample_demo.yaml; results in "
                f"{args.output_dir}")
    data = "the bundled SYNTHETIC sample" if data_args.dataset_name is None else data_args.dataset_name + (
        " (SYNTHETIC: built from the bundled sample)" * synthetic)
    return f"{what} on {data}; results in {args.output_dir}"


def load_splits(data_args, fusion: str, needed: list[str]) -> datasets.DatasetDict:
    """The dataset's splits, checked for what the run reads: the `needed` splits, and video for a fusion model."""
    splits = load_fiber(data_args.dataset_name, data_args.dataset_config_name)
    described = f"{data_args.dataset_name or 'the bundled sample'} (config {data_args.dataset_config_name!r})"
    if fusion != "none" and any(VIDEO_COLUMN not in split.column_names for split in splits.values()):
        raise DataError(f"--fusion {fusion} needs video features, but {described} has no {VIDEO_COLUMN!r} column: use "
                        "--dataset_config_name i3d, or --fusion none.")
    if any(split not in splits for split in needed):
        raise DataError(f"{described} has splits {', '.join(splits)}; this run reads {', '.join(needed)}.")
    return splits


def checkpoint_folder(name: str, token: str | None) -> Path:
    """A folder, or REPO_ID[:FOLDER] (default last-checkpoint/) downloaded from the Hub by every process."""
    if Path(name).is_dir():
        return Path(name)
    repo_id, _, folder = name.partition(":")
    folder = folder.strip("/") or "last-checkpoint"
    problem = hub_problem(repo_id) if is_hub_id(repo_id) and ".." not in folder.split("/") else "not a Hub repo"
    if problem is not None:
        raise DataError(f"--resume_from_checkpoint {name}: no such checkpoint folder, and {problem}")
    path = Path(snapshot_download(repo_id, allow_patterns=f"{folder}/*", token=token)) / folder
    if not path.is_dir():
        raise DataError(f"--resume_from_checkpoint {name}: the Hub repo {repo_id} has no folder {folder}/")
    return path


def check_checkpoint(folder: Path, settings: dict, trust_checkpoint: bool) -> None:
    """Refuse a checkpoint of other settings, or with a pickle that would create more than tensors and numbers."""
    try:
        state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        saved = state["stateful_callbacks"][RunRecord.__name__]["args"]["settings"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(f"{folder}: not a checkpoint of {PROG} (no FIBER settings in trainer_state.json)") from error
    differences = [f"{key}: {settings.get(key)} here, {saved.get(key)} there"
                   for key in sorted(settings.keys() | saved.keys()) if settings.get(key) != saved.get(key)]
    if differences:
        raise DataError(f"{folder} was saved by a run with other settings ({'; '.join(differences)})")
    for path in [] if trust_checkpoint else sorted(folder.rglob("*")):
        if path.is_file() and path.suffix not in NOT_PICKLES and path.name != "training_args.bin":
            try:
                unsafe = sorted(set(get_unsafe_globals_in_checkpoint(path)) - SAFE_GLOBALS)
            except (ValueError, RuntimeError, OSError) as error:
                unsafe = [f"what torch cannot check ({' '.join(str(error).split())})"]
            if unsafe:
                raise DataError(f"{path}: a pickle that would create {', '.join(unsafe)} when loaded; only tensors, "
                                "numbers and NumPy arrays are loaded from a checkpoint (--trust_checkpoint: yours)")


def build_model(model_args, data_args, splits, fusion: str, options: dict, base: FiberT5Config | None):
    """The model (a tiny one over the shipped tokenizer, or a checkpoint: a T5 one gets new video weights) and its
    processor; a fusion model reads the data's features, of their size."""
    name, size = model_args.model_name_or_path, next(iter(splits.values())).features.get(VIDEO_COLUMN)
    features = {"video_features_name": data_args.dataset_config_name, "video_feature_size": size and size.shape[1]} \
        if fusion != "none" else {}
    if name is None:
        tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
        config = build_tiny_config(tokenizer, fusion, **features)
        try:
            config.update_from_string(model_args.config_overrides) if model_args.config_overrides else None
        except ValueError as error:
            raise UsageError(f"--config_overrides {model_args.config_overrides}: {error}") from error
        model = FiberT5ForConditionalGeneration(config)
    else:
        if features and base and base.fusion != "none" and base.video_feature_size != features["video_feature_size"]:
            raise DataError(
                f"--model_name_or_path {name} reads video features of size {base.video_feature_size} (its "
                f"{base.video_features_name!r} features), but the dataset's {data_args.dataset_config_name!r} config "
                f"has features of size {features['video_feature_size']}: give the config of the features it was "
                "trained on, or start from a T5 or text-only checkpoint")
        model = FiberT5ForConditionalGeneration.from_pretrained(name, fusion=fusion, **features, **options)
        tokenizer = AutoTokenizer.from_pretrained(name, **options)
    beams = model_args.num_beams or model.generation_config.num_beams  # early stopping is beam search's alone
    model.generation_config.update(num_beams=beams, early_stopping=beams > 1 and model.generation_config.early_stopping)
    return model, FiberProcessor(tokenizer, single_feature=model_args.single_feature)


def write_outputs(args, results: dict, splits, outputs: dict, record: dict, trainer, nlp) -> None:
    """predictions.jsonl, results.json, the card, a complete record; the table, the model reloaded, its push."""
    metric, records, output_dir = load_metric(), [], Path(args.output_dir)
    for split, split_outputs in outputs.items():
        results[split], split_records = score(metric, splits[split], split_outputs, split)
        records += split_records
    results["num_beams"] = trainer and trainer.model.generation_config.num_beams
    if trainer is not None and args.do_train:
        results["training"] = {key: getattr(trainer.state, key) for key in ("global_step", "best_model_checkpoint",
                                                                             "best_metric", "log_history")}
        split = "test" if "test" in results else "validation"
        write_model_card(trainer, output_dir / "model", final=True, results=results.get(split, {}), split=split)
    write_jsonl(output_dir / "predictions.jsonl", records)
    write_json(output_dir / "results.json", results)
    finish_output(output_dir, record)
    print(results_table(f"FIBER results ({output_dir / 'results.json'})", results), flush=True)
    if trainer is not None and args.do_train:
        print(fill_with_saved_model(output_dir / "model", splits[list(outputs)[-1] if outputs else "train"], nlp))
        if args.push_to_hub:  # fiberbench.hub logs the push
            push_folder(output_dir / "model", args.hub_model_id or output_dir.resolve().name, token=args.hub_token,
                        commit_message="End of training")


def fill_with_saved_model(folder: Path, split: datasets.Dataset, nlp) -> str:
    """Reload the saved model from disk, as a user would, and fill a few blanks of `split`."""
    model, processor = AutoModelForSeq2SeqLM.from_pretrained(folder), AutoProcessor.from_pretrained(folder)
    rows = split.select(range(min(3, len(split))))
    video = rows.with_format("numpy")[VIDEO_COLUMN] if model.config.fusion != "none" else None
    answers = model.fill_blanks(processor, rows["masked_caption"], video, nlp=nlp, only_noun_phrases=nlp is not None)
    return "\n".join([f"Reloaded {folder} and filled {len(answers)} blanks:"] + [
        f"  {caption}  ->  {answer!r}  (label: {label!r})"
        for caption, answer, label in zip(rows["masked_caption"], answers, rows["label"])])


if __name__ == "__main__":
    sys.exit(main())
