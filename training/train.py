"""Train and evaluate a FIBER model, or run a baseline, with `Seq2SeqTrainer` (paper §4-5, App. B).

    accelerate launch --config_file training/accelerate.yaml training/train.py                  # the main job
    accelerate launch --config_file training/accelerate.yaml training/train.py --fusion none    # text only
    accelerate launch --config_file training/accelerate.yaml training/train.py --config t5_i3d  # a row of Table 3

The arguments are the Trainer's (`Seq2SeqTrainingArguments`, the paper's recipe as defaults) and FIBER's
(`fiberbench.training.arguments`). The Trainer validates after each epoch and keeps the model with the best
validation F1, saves and rotates checkpoints, resumes, reports to trackers and pushes (`hub_strategy`). This script
adds what FIBER needs: the output folder's guarantees (`fiberbench.outputs`: a new or empty folder, or an earlier
run of this script with --overwrite_output_dir, locked while it runs, its record `fiberbench_output.json` updated at
each save), checkpoints resumed only under their own settings and without unpickling anything but tensors, a
checkpoint on the Hub (--resume_from_checkpoint REPO_ID[:FOLDER]), and at the end `results.json`,
`predictions.jsonl` and the model folder `model/` with its card, reloaded from disk to fill a few blanks.
"""

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
from fiberbench.data.provenance import is_synthetic
from fiberbench.errors import DataError, UsageError, alike_on_every_process, run_reporting_errors
from fiberbench.hub import check_can_push, hub_problem, is_hub_id, push_folder
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.models import model_loading_options
from fiberbench.modeling import SAMPLE_TOKENIZER_PATH, FiberProcessor, FiberT5Config, FiberT5ForConditionalGeneration
from fiberbench.modeling import build_tiny_config
from fiberbench.modeling.decoding import ZERO_SHOT_NUM_BEAMS
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.outputs import RUNNING, check_output, finish_output, output_lock, start_output, write_json, write_jsonl
from fiberbench.training.arguments import PROG, SAMPLE_DEMO_CONFIG, parse_args, training_settings
from fiberbench.training.evaluation import load_metric, score
from fiberbench.training.inputs import VIDEO_COLUMN, FiberDataCollator, FiberExamples
from fiberbench.training.trainer import FiberMetrics, FiberSeq2SeqTrainer

logger = logging.getLogger("fiberbench.training.train")

COMMAND = "training/train.py"
MODEL_FOLDER, RESULTS_FILE, PREDICTIONS_FILE = "model", "results.json", "predictions.jsonl"
EVAL_SPLITS = {"validation": "do_eval", "test": "do_predict"}
# The folder of a Hub repo that --hub_strategy checkpoint pushes (the Trainer's), resumed by REPO_ID alone.
LAST_CHECKPOINT = "last-checkpoint"
# What the Trainer's resume unpickles (rng_state*.pth, optimizer.pt, scheduler.pt, scaler.pt) it loads with
# torch.load(weights_only=True) and, for the RNG states, NumPy's arrays (transformers' `safe_globals`). Its
# training_args.bin is written, never loaded.
SAFE_GLOBALS = {
    "numpy._core.multiarray._reconstruct", "numpy.core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype",
    "numpy.dtypes.UInt32DType",
}
NEVER_UNPICKLED = {".json", ".safetensors", ".md", ".txt", ".py"}
NUM_FILLED = 3
# The model card's headline scores.
CARD_METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "map")


class RunRecord(TrainerCallback, ExportableState):
    """The run's settings in each checkpoint's `trainer_state.json`, which a resume compares with its own, and the
    output folder's record updated at each save (main process), so that a killed run lists what it wrote."""

    def __init__(self, settings: dict, output_dir: str | None = None, record: dict | None = None):
        self.settings, self.output_dir, self.record = settings, output_dir, record

    def state(self) -> dict:
        return {"args": {"settings": self.settings}, "attributes": {}}

    def on_save(self, args, state, control, **kwargs):
        if self.record is not None:
            finish_output(self.output_dir, self.record, state=RUNNING)


def main(argv: list | None = None) -> int:
    """Run the script; returns its exit status (1 for a data error, 2 for a usage error, each one line)."""
    return run_reporting_errors(lambda: train(argv), prog=PROG)


def train(argv: list | None) -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
        # Without it, `accelerate launch --multi_gpu` on a machine without GPUs starts independent one-process runs.
        os.environ.setdefault("ACCELERATE_USE_CPU", "1")
    with alike_on_every_process():
        model_args, data_args, fiber_args, args = parse_args(argv)
        check_args(model_args, data_args, fiber_args, args)
        resume = args.resume_from_checkpoint
        here = resume is not None and Path(resume).resolve().parent == Path(args.output_dir).resolve()
        inputs = [data_args.dataset_name or SAMPLE_DIR, model_args.model_name_or_path, fiber_args.config]
        previous = check_output(
            args.output_dir, command=COMMAND, flag="--output_dir", overwrite=fiber_args.overwrite_output_dir,
            folder=True, resume=here, inputs=[path for path in inputs if path and Path(path).exists()],
        )
    configure_logging()
    if not args.should_log:
        for library in (transformers, datasets):
            library.utils.logging.set_verbosity_error()
    if args.disable_tqdm:
        transformers.utils.logging.disable_progress_bar()
        datasets.disable_progress_bars()
    sample_demo = model_args.model_name_or_path is None and data_args.dataset_name is None
    synthetic = is_synthetic(data_args.dataset_name)
    logger.info(describe(model_args, data_args, args, sample_demo, synthetic))
    logger.info(f"Process {args.process_index} of {args.world_size} on {args.device}")
    with alike_on_every_process():
        options, base = checkpoint_options(model_args)
        fusion = "none" if model_args.baseline else model_args.fusion or (base.fusion if base else "early")
        if data_args.dataset_config_name is None:
            data_args.dataset_config_name = "text" if fusion == "none" else base.video_features_name if base else "i3d"
        splits = load_splits(data_args, fusion, args)
        checkpoint = checkpoint_folder(resume, args.hub_token) if resume else None
        if args.do_train and "train" in splits:
            batches = math.ceil(len(splits["train"]) / (args.per_device_train_batch_size * args.world_size))
            args.warmup_steps = args.warmup_steps or round(
                fiber_args.warmup_epochs * math.ceil(batches / args.gradient_accumulation_steps)
            )
        settings = training_settings(model_args, data_args, fiber_args, args)
        if checkpoint is not None:
            check_checkpoint(checkpoint, settings, fiber_args.trust_checkpoint)
    with output_lock(args.output_dir, "--output_dir") if args.should_save else nullcontext():
        record = start_output(args.output_dir, COMMAND, previous, folder=True, resume=here) if args.should_save else None
        results = {
            "model_name_or_path": model_args.model_name_or_path,
            "baseline": model_args.baseline,
            "dataset_name": data_args.dataset_name or "bundled sample",
            "dataset_config_name": data_args.dataset_config_name,
            "synthetic": synthetic,
            "fusion": fusion,
            "single_feature": model_args.single_feature,
            "num_processes": args.world_size,
            "resumed_from": resume,
            "arguments": {**asdict(model_args), **asdict(data_args), **asdict(fiber_args), **args.to_dict()},
        }
        if model_args.baseline:
            trainer, nlp, outputs = None, None, run_baseline(splits, args, results)
        else:
            trainer, nlp, outputs = run_model(model_args, data_args, fiber_args, args, splits, fusion, options,
                                              settings, checkpoint, record, synthetic)
        if args.should_save:
            write_outputs(args, results, outputs, record, splits, trainer, nlp)


def check_args(model_args, data_args, fiber_args, args) -> None:
    """Fail on flags that cannot work together, before anything is loaded."""
    if not (args.do_train or args.do_eval or args.do_predict):
        raise UsageError("Nothing to do: --do_train, --do_eval and --do_predict are all false.")
    if model_args.baseline and model_args.model_name_or_path:
        raise UsageError(f"--baseline {model_args.baseline} uses no model; drop --model_name_or_path.")
    if model_args.config_overrides and model_args.model_name_or_path:
        raise UsageError("--config_overrides applies to the tiny model built from scratch, not to --model_name_or_path.")
    if args.resume_from_checkpoint and not args.do_train:
        raise UsageError("--resume_from_checkpoint resumes training; it needs --do_train.")
    if args.push_to_hub:
        if model_args.baseline or not args.do_train:
            raise UsageError("--push_to_hub pushes the model this run trains; it needs training (and no --baseline).")
        check_can_push(args.hub_model_id or Path(args.output_dir).resolve().name, args.hub_token)
    for flag, name in (("--dataset_name", data_args.dataset_name), ("--model_name_or_path", model_args.model_name_or_path)):
        if name is not None and not Path(name).expanduser().exists() and not is_hub_id(name):
            raise DataError(f"{flag} {name}: no such folder (and not a Hub {flag[2:].split('_')[0]} id)")


def describe(model_args, data_args, args, sample_demo: bool, synthetic: bool) -> str:
    """The first log line: what is trained (or run) on what, and whether the data is SYNTHETIC."""
    what = (
        f"the {model_args.baseline.replace('_', '-')} baseline" if model_args.baseline
        else f"{model_args.model_name_or_path}" if model_args.model_name_or_path
        else "a tiny model built from the tokenizer shipped with the package"
    )
    data = "the bundled SYNTHETIC sample" if data_args.dataset_name is None else data_args.dataset_name + (
        " (SYNTHETIC: built from the bundled sample)" if synthetic else ""
    )
    if sample_demo:
        return (f"Main job: no --model_name_or_path and no --dataset_name given, so {what} on {data}, offline, with "
                f"the settings of training/configs/sample_demo.yaml; results in {args.output_dir}")
    action = "Training and evaluating" if args.do_train and not model_args.baseline else "Evaluating"
    return f"{action} {what} on {data}; results in {args.output_dir}"


def checkpoint_options(model_args) -> tuple[dict, FiberT5Config | None]:
    """`from_pretrained` options for --model_name_or_path (a Hub id is checked to load, in seconds), and its config
    when it is a FIBER checkpoint."""
    name = model_args.model_name_or_path
    if name is None:
        return {}, None
    options = {} if Path(name).expanduser().is_dir() else model_loading_options(name, flag="--model_name_or_path")
    try:
        config = AutoConfig.from_pretrained(name, **options)
    except (OSError, ValueError) as error:
        raise DataError(f"--model_name_or_path {name}: its config cannot be loaded ({error})") from error
    return options, config if isinstance(config, FiberT5Config) else None


def load_splits(data_args, fusion: str, args) -> datasets.DatasetDict:
    """The dataset's splits, checked for what the run reads."""
    splits = load_fiber(data_args.dataset_name, data_args.dataset_config_name)
    described = f"{data_args.dataset_name or 'the bundled sample'} (config {data_args.dataset_config_name!r})"
    if fusion != "none" and any(VIDEO_COLUMN not in split.column_names for split in splits.values()):
        raise DataError(f"--fusion {fusion} needs video features, but {described} has no {VIDEO_COLUMN!r} column: "
                        "use --dataset_config_name i3d, or --fusion none.")
    needed = ["train"] * args.do_train + [name for name, flag in EVAL_SPLITS.items() if getattr(args, flag)]
    missing = [name for name in needed if name not in splits]
    if missing:
        raise DataError(f"{described} has no {' or '.join(missing)} split (it has: {', '.join(splits)}).")
    return splits


def checkpoint_folder(name: str, token: str | None) -> Path:
    """--resume_from_checkpoint: a local folder, or REPO_ID[:FOLDER] on the Hub (default: its last-checkpoint/),
    downloaded into the Hugging Face cache (by every process)."""
    if Path(name).is_dir():
        return Path(name)
    repo_id, _, folder = name.partition(":")
    folder = folder.strip("/") or LAST_CHECKPOINT
    if not is_hub_id(repo_id) or ".." in folder.split("/"):
        raise DataError(f"--resume_from_checkpoint {name}: no such checkpoint folder (and not a Hub repo, REPO_ID or "
                        "REPO_ID:FOLDER)")
    problem = hub_problem(repo_id)
    if problem is not None:
        raise DataError(f"--resume_from_checkpoint {name}: no such checkpoint folder, and {problem}")
    path = Path(snapshot_download(repo_id, allow_patterns=f"{folder}/*", token=token)) / folder
    if not path.is_dir():
        raise DataError(f"--resume_from_checkpoint {name}: the Hub repo {repo_id} has no folder {folder}/")
    logger.info(f"Downloaded {name} into {path}")
    return path


def check_checkpoint(folder: Path, settings: dict, trust_checkpoint: bool) -> None:
    """Refuse, before anything is loaded, a checkpoint saved under other settings than this run's, or holding a
    pickle that would create more than tensors, numbers and NumPy arrays (unless `trust_checkpoint`)."""
    try:
        state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        saved = state["stateful_callbacks"][RunRecord.__name__]["args"]["settings"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(f"{folder}: not a checkpoint of {PROG} (no FIBER settings in its trainer_state.json)") from error
    differences = [
        f"{name}: {settings.get(name)} here, {saved.get(name)} there"
        for name in sorted(settings.keys() | saved.keys()) if settings.get(name) != saved.get(name)
    ]
    if differences:
        raise DataError(f"{folder} was saved by a run with other settings ({'; '.join(differences)}): resume with "
                        "those, or start a new run")
    for path in sorted(folder.rglob("*")):
        if trust_checkpoint or not path.is_file() or path.suffix in NEVER_UNPICKLED or path.name == "training_args.bin":
            continue
        try:
            unsafe = sorted(set(get_unsafe_globals_in_checkpoint(path)) - SAFE_GLOBALS)
        except (ValueError, RuntimeError, OSError) as error:
            unsafe = [f"something torch.load cannot check ({' '.join(str(error).split())})"]
        if unsafe:
            raise DataError(f"{path}: a pickle that would create {', '.join(unsafe)} when loaded; only tensors, numbers "
                            "and NumPy arrays are loaded from a checkpoint (--trust_checkpoint: one you wrote)")


def run_baseline(splits, args, results: dict) -> list[tuple]:
    """The most-frequent-answer baseline: each evaluated split's (name, split, outputs)."""
    results["answer"] = answer = most_frequent_answer(list(splits["train"]["label"]))
    logger.info(f"Most frequent training answer: {answer!r}")
    return [
        (name, splits[name], [{"index": i, "prediction": answer, "candidates": [answer]} for i in range(len(splits[name]))])
        for name, flag in EVAL_SPLITS.items() if getattr(args, flag)
    ]


def run_model(model_args, data_args, fiber_args, args, splits, fusion, options, settings, checkpoint, record, synthetic):
    """Train (with --do_train) and evaluate the model with the Trainer, saving the model into `model/`: the trainer,
    and each evaluated split's (name, split, outputs)."""
    transformers.set_seed(args.seed)  # before the model's weights are drawn
    model, processor = build_model(model_args, data_args, splits, fusion, options)
    with_video = fusion != "none"
    nlp = load_spacy_pipeline(fiber_args.spacy_model) if fiber_args.only_noun_phrases else None
    drawn = torch.random.get_rng_state()
    trainer = FiberSeq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=FiberExamples(splits["train"], with_video) if args.do_train else None,
        eval_dataset=FiberExamples(splits["validation"], with_video) if args.do_eval else None,
        data_collator=FiberDataCollator(processor),
        processing_class=processor,
        compute_metrics=FiberMetrics(processor, splits["validation"], nlp=nlp,
                                     only_noun_phrases=fiber_args.only_noun_phrases) if args.do_eval else None,
        callbacks=[RunRecord(settings, args.output_dir, record)],
        dataset_name=data_args.dataset_name or "fiberbench-bundled-sample",
        dataset_config=data_args.dataset_config_name,
        synthetic=synthetic,
    )
    # The Trainer seeds the RNG again as it starts: dropout draws on from where the weights left it, so that --seed
    # gives the same run as before the Trainer ran it (the main job's results).
    torch.random.set_rng_state(drawn)
    if args.do_train:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        trainer.save_model(str(Path(args.output_dir) / MODEL_FOLDER))
    trainer.compute_metrics, outputs = None, []  # the final evaluation is scored below, split by split
    for name, flag in EVAL_SPLITS.items():
        if getattr(args, flag):
            prediction = trainer.predict(FiberExamples(splits[name], with_video), metric_key_prefix=name)
            scorer = FiberMetrics(processor, splits[name], fiber_args.only_noun_phrases, nlp)
            outputs.append((name, splits[name], scorer.outputs(prediction)))
    return trainer, nlp, outputs


def build_model(model_args, data_args, splits, fusion: str, options: dict):
    """The model and its processor: with no --model_name_or_path a tiny model (`build_tiny_config`, plus
    --config_overrides) over the tokenizer shipped with the package (no download); else the checkpoint, a T5 one
    getting new video weights. A fusion model reads the data's features (their config and size)."""
    name = model_args.model_name_or_path
    features = {}
    if fusion != "none":
        size = next(iter(splits.values())).features[VIDEO_COLUMN].shape[1]
        features = {"video_feature_size": size, "video_features_name": data_args.dataset_config_name}
    if name is None:
        tokenizer = AutoTokenizer.from_pretrained(SAMPLE_TOKENIZER_PATH)
        config = build_tiny_config(tokenizer, fusion, **features)
        try:
            config.update_from_string(model_args.config_overrides or "")
        except ValueError as error:
            raise UsageError(f"--config_overrides {model_args.config_overrides}: {error}") from error
        model = FiberT5ForConditionalGeneration(config)
    else:
        base = AutoConfig.from_pretrained(name, **options)
        if features and isinstance(base, FiberT5Config) and base.fusion != "none":
            if base.video_feature_size != features["video_feature_size"]:
                raise DataError(
                    f"--model_name_or_path {name} reads video features of size {base.video_feature_size} (its "
                    f"{base.video_features_name!r} features), but the dataset's {data_args.dataset_config_name!r} "
                    f"config has features of size {features['video_feature_size']}: give the config of the features "
                    "it was trained on, or start from a T5 or text-only checkpoint"
                )
        tokenizer = AutoTokenizer.from_pretrained(name, **options)
        model = FiberT5ForConditionalGeneration.from_pretrained(name, fusion=fusion, **features, **options)
        if not isinstance(base, FiberT5Config) and fusion == "none" and not model_args.num_beams:
            model.generation_config.num_beams = ZERO_SHOT_NUM_BEAMS
    if model_args.num_beams:
        model.generation_config.num_beams = model_args.num_beams
    return model, FiberProcessor(tokenizer, single_feature=model_args.single_feature)


def write_outputs(args, results: dict, outputs: list[tuple], record: dict, splits, trainer=None, nlp=None) -> None:
    """predictions.jsonl, results.json and the model's card (main process); the record says the run is complete;
    then the results table, the saved model reloaded to fill a few blanks, and the push of the model."""
    metric, records = load_metric(), []
    for name, split, split_outputs in outputs:
        results[name], split_records = score(metric, split, split_outputs, name)
        records += split_records
    output_dir, model_dir = Path(args.output_dir), Path(args.output_dir) / MODEL_FOLDER
    if trainer is not None:
        results["num_beams"] = trainer.model.generation_config.num_beams
        if args.do_train:
            state = trainer.state
            results["training"] = {"global_step": state.global_step, "best_model_checkpoint": state.best_model_checkpoint,
                                   "best_f1": state.best_metric, "log_history": state.log_history}
            split = next((name for name in ("test", "validation") if name in results), "test")
            headline = {key: results[split][key] for key in CARD_METRICS if key in results.get(split, {})}
            trainer.write_model_card(model_dir, final=True, results=headline, split=split)
    write_jsonl(output_dir / PREDICTIONS_FILE, records)
    write_json(output_dir / RESULTS_FILE, results)
    finish_output(output_dir, record)
    print(results_table(f"FIBER results ({output_dir / RESULTS_FILE})", results), flush=True)
    if trainer is not None and args.do_train:
        print(fill_with_saved_model(model_dir, outputs[-1][1] if outputs else splits["train"], nlp), flush=True)
        if args.push_to_hub:
            repo_id = trainer.hub_model_id or args.hub_model_id or output_dir.resolve().name
            url = push_folder(model_dir, repo_id, token=args.hub_token, commit_message="FIBER model trained with fiberbench")
            logger.info(f"Pushed {model_dir} to {url}")


TABLE_COLUMNS = {"EM": "exact_match", "F1": "f1", "EM label": "exact_match_label_only", "F1 label": "f1_label_only",
                 "C@1": "correct_at_1", "MAP": "map", "P(label)": "label_probability"}


def results_table(title: str, results: dict) -> str:
    """A Markdown table with one row per evaluated split (EM/F1 in %, P(label) in 0-1)."""
    rows = [["split", "n", *TABLE_COLUMNS]]
    for split in (name for name in EVAL_SPLITS if name in results):
        metrics = results[split] | {"correct_at_1": results[split]["correct_at_k"].get("1")}
        cells = [metrics[key] for key in TABLE_COLUMNS.values()]
        rows.append([split, str(metrics["num_examples"])] + [
            "-" if value is None else f"{value:.3f}" if key == "label_probability" else f"{value:.1f}"
            for key, value in zip(TABLE_COLUMNS.values(), cells)
        ])
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    return "\n".join([title, lines[0], "|" + "|".join("-" * (width + 2) for width in widths) + "|", *lines[1:]])


def fill_with_saved_model(folder: Path, split: datasets.Dataset, nlp) -> str:
    """Reload the saved model from disk, as a user would, and fill a few blanks of `split`."""
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    processor = AutoProcessor.from_pretrained(folder)
    rows = split.select(range(min(NUM_FILLED, len(split))))
    video = rows.with_format("numpy")[VIDEO_COLUMN] if model.config.fusion != "none" else None
    answers = model.fill_blanks(processor, rows["masked_caption"], video_features=video, only_noun_phrases=bool(nlp),
                                nlp=nlp)
    lines = [f"Reloaded {folder} and filled {len(answers)} blanks:"]
    lines += [f"  {caption}  ->  {answer!r}  (label: {label!r})"
              for caption, answer, label in zip(rows["masked_caption"], answers, rows["label"])]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
