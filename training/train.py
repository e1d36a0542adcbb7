"""Train and evaluate a FIBER model, or run a baseline, with Accelerate (paper §4-5, App. B).

    accelerate launch training/train.py                    # main job: tiny model, bundled sample, offline
    accelerate launch training/train.py --fusion none      # the same, text only
    accelerate launch training/train.py --config t5_i3d    # a row of the paper's Table 3 (configs/*.yaml)

The same script runs on a CPU, one GPU, several GPUs or nodes (whatever `accelerate config` or
`accelerate launch` sets up). It evaluates on validation after each epoch, keeps the model with
the best validation F1, evaluates it at the end (validation and test), and writes into
--output_dir: `results.json`, `predictions.jsonl`, the model folder `model/` (save_pretrained,
processor, generation config, model card) and the checkpoints asked for by --checkpointing_steps.
"""

import logging
import math
import sys
from pathlib import Path

import datasets
import torch
import transformers
from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.logging import get_logger
from accelerate.utils import parse_flag_from_env, set_seed
from tqdm.auto import tqdm
from transformers import get_scheduler

from fiberbench.files import write_json, write_jsonl, write_text
from fiberbench.hub import push_folder
from fiberbench.modeling import FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.training.model_card import make_model_card
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.training.arguments import hub_repo_id, parse_args
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.training.checkpointing import TrainingProgress, batches_to_skip, resume, save_checkpoint
from fiberbench.training.evaluation import Evaluator, load_metric, score
from fiberbench.training.inputs import default_config_name, load_splits, make_dataloader
from fiberbench.training.models import build_model, resolve_fusion
from fiberbench.training.outputs import (
    PREDICTIONS_FILE,
    RESULTS_FILE,
    format_results_table,
)

logger = get_logger(__name__)

MODEL_FOLDER = "model"
NUM_FILLED_EXAMPLES = 3
EVAL_SPLITS = {"validation": "do_eval", "test": "do_predict"}
# What the model card names as the dataset when none is given: the main job's.
SAMPLE_DATASET_NAME = "fiberbench-bundled-sample"
CARD_METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "map")
# The settings the model card lists as the training hyperparameters.
CARD_HYPERPARAMETERS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "weight_decay",
    "num_train_epochs",
    "max_train_steps",
    "lr_scheduler_type",
    "num_warmup_steps",
    "seed",
    "single_feature",
    "only_noun_phrases",
)


def choose_mixed_precision(choice: str) -> str | None:
    """--mixed_precision, where "auto" is bf16 on a GPU that has it and otherwise Accelerate's own setting."""
    if choice != "auto":
        return choice
    # Read before the Accelerator exists: creating accelerate's state here would fix it before
    # the Accelerator applies ACCELERATE_USE_CPU (two CPU processes would then run as two single ones).
    on_gpu = torch.cuda.is_available() and not parse_flag_from_env("ACCELERATE_USE_CPU")
    return "bf16" if on_gpu and torch.cuda.is_bf16_supported() else None


def describe_run(args, fusion_text: str) -> str:
    """The first log line: what is trained (or run) on what."""
    if args.baseline is not None:
        what = f"the {args.baseline.replace('_', '-')} baseline"
    elif args.model_name_or_path is None:
        what = f"a tiny {fusion_text} model built from the tokenizer shipped with the package"
    else:
        what = f"{args.model_name_or_path} ({fusion_text})"
    data = "the bundled SYNTHETIC sample" if args.dataset_name is None else args.dataset_name
    if args.sample_demo:
        return (
            f"Main job: no --model_name_or_path and no --dataset_name given, so {what} on {data}, offline, "
            f"with the settings of training/configs/sample_demo.yaml; results in {args.output_dir}"
        )
    action = "Training and evaluating" if args.do_train and args.baseline is None else "Evaluating"
    return f"{action} {what} on {data}; results in {args.output_dir}"


def setup_logging(accelerator: Accelerator) -> None:
    """INFO logs from this script on the main process; library warnings only, and errors only elsewhere."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if accelerator.is_local_main_process:
        datasets.utils.logging.set_verbosity_warning()
        transformers.utils.logging.set_verbosity_warning()
    else:
        datasets.utils.logging.set_verbosity_error()
        transformers.utils.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def run_baseline(args, splits: datasets.DatasetDict, accelerator: Accelerator) -> None:
    """The most-frequent-answer baseline: the same outputs as a model run, from the main process."""
    if accelerator.is_main_process:
        answer = most_frequent_answer(splits["train"]["label"])
        logger.info(f"Most frequent training answer: {answer!r}")
        metric = load_metric()
        results = {**run_summary(args, accelerator, fusion="none"), "answer": answer}
        records = []
        for split_name in evaluated_splits(args, splits):
            outputs = [
                {"index": i, "prediction": answer, "candidates": [answer]} for i in range(len(splits[split_name]))
            ]
            results[split_name], split_records = score(metric, splits[split_name], outputs, split_name)
            records += split_records
        write_outputs(Path(args.output_dir), results, records)
    accelerator.wait_for_everyone()


def evaluated_splits(args, splits: datasets.DatasetDict) -> list[str]:
    """The splits evaluated at the end: validation with --do_eval, test with --do_predict."""
    names = [name for name, flag in EVAL_SPLITS.items() if getattr(args, flag)]
    missing = [name for name in names if name not in splits]
    if missing:
        raise ValueError(f"The dataset has no {' or '.join(missing)} split (it has: {', '.join(splits)}).")
    return names


def run_summary(args, accelerator: Accelerator, fusion: str) -> dict:
    """The settings that identify a run, recorded at the top of results.json."""
    return {
        "model_name_or_path": args.model_name_or_path,
        "baseline": args.baseline,
        "dataset_name": args.dataset_name or "bundled sample",
        "dataset_config_name": args.dataset_config_name,
        "fusion": fusion,
        "single_feature": args.single_feature,
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        "arguments": {key: value for key, value in vars(args).items() if key != "hub_token"},
    }


def write_outputs(output_dir: Path, results: dict, records: list[dict]) -> None:
    write_jsonl(output_dir / PREDICTIONS_FILE, records)
    write_json(output_dir / RESULTS_FILE, results)
    tables = {name: results[name] for name in EVAL_SPLITS if name in results}
    print(format_results_table(f"FIBER results ({output_dir / RESULTS_FILE})", tables), flush=True)


def save_model(accelerator: Accelerator, model, processor: FiberProcessor, folder: Path) -> None:
    """`save_pretrained` of the model (safetensors, config, generation config, code files) and its processor."""
    accelerator.wait_for_everyone()
    accelerator.unwrap_model(model).save_pretrained(
        folder,
        is_main_process=accelerator.is_main_process,
        save_function=accelerator.save,
        state_dict=accelerator.get_state_dict(model),
    )
    if accelerator.is_main_process:
        processor.save_pretrained(folder)
    accelerator.wait_for_everyone()


def load_weights(model, folder: Path) -> None:
    """Copy the weights saved in `folder` into `model` in place (it stays prepared for Accelerate)."""
    saved = FiberT5ForConditionalGeneration.from_pretrained(folder)
    model.load_state_dict(saved.state_dict())


def fill_with_saved_model(folder: Path, split: datasets.Dataset, with_video: bool, nlp) -> str:
    """Reload the saved model from disk, as a user would, and fill a few blanks of `split`."""
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder)
    processor = transformers.AutoProcessor.from_pretrained(folder)
    rows = split.select(range(min(NUM_FILLED_EXAMPLES, len(split))))
    answers = model.fill_blanks(
        processor,
        rows["masked_caption"],
        video_features=rows.with_format("numpy")["video_features"] if with_video else None,
        only_noun_phrases=nlp is not None,
        nlp=nlp,
    )
    lines = [f"Reloaded {folder} and filled {len(answers)} blanks:"]
    lines += [
        f"  {caption}  ->  {answer!r}  (label: {label!r})"
        for caption, answer, label in zip(rows["masked_caption"], answers, rows["label"])
    ]
    return "\n".join(lines)


def write_model_card(args, results: dict, fusion: str, folder: Path) -> None:
    """The model card (README.md with the Hub's YAML metadata), from the final evaluation's headline scores."""
    split = next((name for name in ("test", "validation") if name in results), None)
    scores = {key: results[split][key] for key in CARD_METRICS} if split else {}
    card = make_model_card(
        scores,
        base_model=args.model_name_or_path,
        dataset_name=args.dataset_name or SAMPLE_DATASET_NAME,
        fusion=fusion,
        hyperparameters={key: getattr(args, key) for key in CARD_HYPERPARAMETERS}
        | {"num_beams": results["num_beams"], "num_processes": results["num_processes"]},
        model_name=hub_repo_id(args),
        dataset_config=args.dataset_config_name,
        split=split or "test",
        single_feature=args.single_feature,
    )
    write_text(folder / "README.md", card)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=choose_mixed_precision(args.mixed_precision),
        log_with=args.report_to if args.with_tracking else None,
        project_dir=args.output_dir,
        # A sampler seeded per epoch: the same order on every process, and after a resume.
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, data_seed=args.seed),
    )
    setup_logging(accelerator)
    logger.info(describe_run(args, f"{args.fusion}-fusion" if args.fusion else "checkpoint's fusion"))
    logger.info(
        f"Process {accelerator.process_index} of {accelerator.num_processes} on {accelerator.device}",
        main_process_only=False,
    )
    set_seed(args.seed)
    output_dir = Path(args.output_dir)

    fusion = resolve_fusion(args)
    args.dataset_config_name = args.dataset_config_name or default_config_name(fusion)
    with accelerator.main_process_first():
        splits = load_splits(args.dataset_name, args.dataset_config_name, fusion)
    if (args.do_train or args.baseline) and "train" not in splits:
        raise ValueError(f"Training (and the baseline) needs a train split; the dataset has: {', '.join(splits)}.")
    final_splits = evaluated_splits(args, splits)
    if args.baseline is not None:
        run_baseline(args, splits, accelerator)
        return

    model, processor = build_model(args, fusion)
    with_video = fusion != "none"
    nlp = load_spacy_pipeline(args.spacy_model) if args.only_noun_phrases else None
    evaluator = Evaluator(
        accelerator,
        processor,
        {name: splits[name] for name in final_splits},
        with_video,
        args.per_device_eval_batch_size,
        model.generation_config.num_beams,
        args.only_noun_phrases,
        nlp,
    )
    results = run_summary(args, accelerator, fusion) | {"num_beams": model.generation_config.num_beams}
    if args.do_train:
        model = train(args, accelerator, model, processor, splits["train"], with_video, evaluator, results)
    else:
        model = accelerator.prepare(model)

    records = []
    for name in final_splits:
        results[name], split_records = evaluator(model, name, f"Evaluating ({name})")
        records += split_records
    model_folder = output_dir / MODEL_FOLDER
    if args.do_train:
        save_model(accelerator, model, processor, model_folder)
    if accelerator.is_main_process:
        write_outputs(output_dir, results, records)
        if args.do_train:
            write_model_card(args, results, fusion, model_folder)
            shown = splits[final_splits[-1]] if final_splits else splits["train"]
            print(fill_with_saved_model(model_folder, shown, with_video, nlp), flush=True)
            if args.push_to_hub:
                url = push_folder(
                    model_folder,
                    hub_repo_id(args),
                    token=args.hub_token,
                    commit_message="FIBER model trained with fiberbench",
                )
                logger.info(f"Pushed {model_folder} to {url}")
    accelerator.wait_for_everyone()
    accelerator.end_training()


def train(args, accelerator, model, processor, train_split, with_video, evaluator, results):
    """The training loop: epochs of Adam steps with warm-up then linear decay, validation after each epoch.

    Returns the prepared model holding the weights with the best validation F1 (the last
    weights when there is no validation).
    """
    output_dir = Path(args.output_dir)
    best_model_dir = output_dir / MODEL_FOLDER
    train_loader = accelerator.prepare(
        make_dataloader(
            train_split, with_video, args.per_device_train_batch_size, shuffle=True, seed=args.seed, processor=processor
        )
    )
    steps_per_epoch = math.ceil(len(train_loader) / args.gradient_accumulation_steps)
    max_train_steps = args.max_train_steps or args.num_train_epochs * steps_per_epoch
    num_epochs = math.ceil(max_train_steps / steps_per_epoch)
    num_warmup_steps = steps_per_epoch if args.num_warmup_steps is None else args.num_warmup_steps

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    # Accelerate steps a prepared scheduler once per process at each optimizer step.
    lr_scheduler = get_scheduler(
        args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=num_warmup_steps * accelerator.num_processes,
        num_training_steps=max_train_steps * accelerator.num_processes,
    )
    model, optimizer, lr_scheduler = accelerator.prepare(model, optimizer, lr_scheduler)
    progress = TrainingProgress()
    accelerator.register_for_checkpointing(progress)
    if args.with_tracking:
        scalars = {key: value for key, value in vars(args).items() if isinstance(value, (int, float, str, bool))}
        accelerator.init_trackers("tensorboard", scalars)

    total_batch = args.per_device_train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps
    logger.info(
        f"Training on {len(train_split)} examples: {num_epochs} epochs, {max_train_steps} steps of "
        f"{total_batch} examples ({accelerator.num_processes} processes), {num_warmup_steps} warm-up steps"
    )
    if args.resume_from_checkpoint:
        logger.info(f"Resuming from {args.resume_from_checkpoint}")
        resume(accelerator, Path(args.resume_from_checkpoint), progress, best_model_dir)
    skip = batches_to_skip(progress, len(train_loader), args.gradient_accumulation_steps)
    bar = tqdm(
        total=max_train_steps,
        initial=progress.completed_steps,
        desc="Training",
        disable=not accelerator.is_local_main_process,
    )

    for epoch in range(progress.epochs_done, num_epochs):
        model.train()
        train_loader.set_epoch(epoch)
        batches = accelerator.skip_first_batches(train_loader, skip) if skip else train_loader
        skip = 0
        for batch in batches:
            batch.pop("index")
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            progress.add_loss(loss.detach())
            if accelerator.sync_gradients:
                progress.completed_steps += 1
                bar.update(1)
                if (
                    isinstance(args.checkpointing_steps, int)
                    and progress.completed_steps % args.checkpointing_steps == 0
                ):
                    save_checkpoint(accelerator, output_dir / f"step_{progress.completed_steps}", best_model_dir)
                if progress.completed_steps >= max_train_steps:
                    break
        end_epoch(args, accelerator, model, processor, epoch, progress, lr_scheduler, evaluator, results)
        if args.checkpointing_steps == "epoch":
            save_checkpoint(accelerator, output_dir / f"epoch_{epoch}", best_model_dir)
        if progress.completed_steps >= max_train_steps:
            break
    bar.close()

    results["training"] = {
        "completed_steps": progress.completed_steps,
        "epochs": progress.history,
        "best": progress.best,
    }
    if progress.best is not None:
        logger.info(
            f"Best validation F1 {progress.best['f1']:.2f} at epoch {progress.best['epoch']}: evaluating that model"
        )
        load_weights(accelerator.unwrap_model(model), best_model_dir)
    return model


def end_epoch(args, accelerator, model, processor, epoch, progress, lr_scheduler, evaluator, results):
    """After an epoch: validation, the best model so far, the epoch's record in results.json and the tracker."""
    loss = accelerator.reduce(torch.tensor(progress.take_epoch_loss(), device=accelerator.device), "mean").item()
    record = {
        "epoch": epoch,
        "step": progress.completed_steps,
        "train_loss": loss,
        "learning_rate": lr_scheduler.get_last_lr()[0],
    }
    if args.do_eval:
        record["validation"], _ = evaluator(model, "validation", f"Validation (epoch {epoch})")
        if progress.best is None or record["validation"]["f1"] > progress.best["f1"]:
            progress.best = {"epoch": epoch, "step": progress.completed_steps, "f1": record["validation"]["f1"]}
            save_model(accelerator, model, processor, Path(args.output_dir) / MODEL_FOLDER)
    progress.history.append(record)
    progress.epochs_done = epoch + 1
    validation = record.get("validation", {})
    logger.info(
        f"Epoch {epoch}: step {progress.completed_steps}, train loss {loss:.4f}"
        + (f", validation EM {validation['exact_match']:.2f} F1 {validation['f1']:.2f}" if validation else "")
    )
    if args.with_tracking:
        accelerator.log(flat_scalars(record), step=progress.completed_steps)
    if accelerator.is_main_process:
        write_json(
            Path(args.output_dir) / RESULTS_FILE,
            results | {"training": {"epochs": progress.history, "best": progress.best}},
        )


def flat_scalars(record: dict, prefix: str = "") -> dict:
    """A nested record's numbers under "a/b" names (for logs and TensorBoard)."""
    flat = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat |= flat_scalars(value, f"{prefix}{key}/")
        elif isinstance(value, (int, float)):
            flat[f"{prefix}{key}"] = value
    return flat


if __name__ == "__main__":
    sys.exit(main())
