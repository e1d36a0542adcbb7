"""One run of `training/train.py`: data, model or baseline, training, evaluation, outputs, push (paper §4-5, App. B).

`train_and_evaluate(args)` takes the arguments that `fiberbench.training.arguments.parse_args` has
checked, and runs everything that needs torch, transformers, datasets and Accelerate; the script
itself (`training/train.py`) loads none of them before its arguments and the paths they name are
checked. With --push_to_hub the model goes to the Hub at the end, and with --hub_strategy also at
each save, with the checkpoints, in the background (`HubPusher`); --resume_from_checkpoint may
name a checkpoint on the Hub (`download_checkpoint`).
"""

import argparse
import dataclasses
import logging
import math
import os
import time
from pathlib import Path

import accelerate
import datasets
import torch
import transformers
from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.logging import get_logger
from accelerate.utils import DistributedType, ProjectConfiguration, gather_object, parse_flag_from_env, set_seed
from safetensors import SafetensorError
from tqdm.auto import tqdm
from transformers import get_scheduler

from fiberbench.cli import configure_logging, default_num_workers
from fiberbench.data import SAMPLE_DIR
from fiberbench.data.provenance import is_synthetic
from fiberbench.errors import DataError, FiberbenchError, UsageError, alike_on_every_process
from fiberbench.files import write_json, write_jsonl, write_text
from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.modeling import FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.modeling.noun_phrases import load_spacy_pipeline
from fiberbench.training.arguments import hub_checkpoint, hub_repo_id, training_settings
from fiberbench.training.checkpointing import (
    BEST_MODEL_IN_CHECKPOINT,
    CheckpointError,
    TrainingProgress,
    batches_to_skip,
    check_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from fiberbench.training.evaluation import Evaluator, load_metric, score
from fiberbench.training.inputs import (
    FiberExamples,
    default_config_name,
    load_splits,
    make_dataloader,
    video_feature_size,
)
from fiberbench.training.hub_checkpoints import (
    DownloadedCheckpoint,
    HubPusher,
    download_checkpoint,
    remove_stale_pushes,
)
from fiberbench.training.model_card import SavedAt, make_model_card
from fiberbench.training.models import VideoFeatures, build_model, checkpoint_config, loading_options, resolve_fusion
from fiberbench.ownership import COMPLETE, RUNNING
from fiberbench.training.outputs import (
    LOGS_FOLDER,
    MODEL_FOLDER,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    RunFolder,
    format_results_table,
)

logger = get_logger(__name__)

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
HOW_TO_LAUNCH = (
    "start several processes with `accelerate launch --multi_gpu --num_processes N training/train.py ...` "
    "(on a machine without GPUs too: the processes then run on its CPUs and talk over gloo), or set it up "
    "once with `accelerate config`; `accelerate launch --num_processes N` without --multi_gpu, or with --cpu, "
    "starts a single process."
)


class TrainingDivergedError(FiberbenchError):
    """The training loss became NaN or infinite: the run stops rather than save or score broken weights."""


@dataclasses.dataclass
class Run:
    """What every stage of a run shares: its settings, processes, output folder and data."""

    args: argparse.Namespace
    accelerator: Accelerator
    output: RunFolder
    splits: datasets.DatasetDict
    fusion: str
    synthetic: bool
    num_workers: int
    # The checkpoint folder to resume from (a Hub checkpoint's in the local cache), and what results.json says of it.
    checkpoint: Path | None = None
    resumed_from: dict | None = None
    # The main process's pushes to the Hub with --push_to_hub (None elsewhere).
    hub: HubPusher | None = None

    @property
    def with_video(self) -> bool:
        return self.fusion != "none"

    @property
    def video(self) -> VideoFeatures | None:
        """The video features the model reads (their config and size, from the data), or None for text only."""
        if not self.with_video:
            return None
        return VideoFeatures(self.args.dataset_config_name, video_feature_size(self.splits))

    @property
    def evaluated_splits(self) -> list[str]:
        return evaluated_splits(self.args)


def evaluated_splits(args: argparse.Namespace) -> list[str]:
    """The splits evaluated at the end: validation with --do_eval, test with --do_predict."""
    return [name for name, flag in EVAL_SPLITS.items() if getattr(args, flag)]


def train_and_evaluate(args: argparse.Namespace) -> None:
    """The whole run: checks, data, model or baseline, training, evaluation, outputs, push."""
    source = hub_checkpoint(args)
    with alike_on_every_process():
        output = RunFolder.check(
            args.output_dir,
            overwrite=args.overwrite_output_dir,
            # A Hub checkpoint is an input, downloaded into the cache: the folder is checked as a new run's.
            resume_from_checkpoint=None if source else args.resume_from_checkpoint,
            inputs=[
                path
                for path in (args.dataset_name or SAMPLE_DIR, args.model_name_or_path, args.config_path)
                if path is not None and Path(path).exists()
            ],
        )
        options = loading_options(args.model_name_or_path) if args.model_name_or_path else {}
        # Every process downloads (the cache shares the files of one machine), before the processes form a group:
        # a failed download stops each one, never a group waiting for another.
        downloaded = download_checkpoint(source, trust_checkpoint=args.trust_checkpoint) if source else None
        accelerator = make_accelerator(args)
        setup_logging(accelerator)
    with output.open(accelerator):
        run_with_the_folder(args, accelerator, output, options, downloaded)


def run_with_the_folder(
    args: argparse.Namespace,
    accelerator: Accelerator,
    output: RunFolder,
    options: dict,
    downloaded: DownloadedCheckpoint | None = None,
) -> None:
    """The run, once its output folder is checked and locked: data, model or baseline, training, evaluation.

    `downloaded`: the Hub checkpoint of --resume_from_checkpoint, in this machine's cache.
    """
    set_seed(args.seed)

    with alike_on_every_process():  # every process reads the same data and checkpoint
        fusion = resolve_fusion(args, options)
        if args.dataset_config_name is None:
            checkpoint = checkpoint_config(args, options) if fusion != "none" else None
            args.dataset_config_name = default_config_name(fusion, checkpoint.video_features_name if checkpoint else None)
        with accelerator.main_process_first():
            splits = load_splits(args.dataset_name, args.dataset_config_name, fusion)
        needed = (["train"] if args.do_train or args.baseline else []) + evaluated_splits(args)
        missing = [name for name in needed if name not in splits]
        if missing:
            raise DataError(f"The dataset has no {' or '.join(missing)} split (it has: {', '.join(splits)}).")
        resume_folder, resumed_from = None, None
        if args.resume_from_checkpoint:
            resume_folder = Path(args.resume_from_checkpoint)
            resumed_from = {"checkpoint": args.resume_from_checkpoint}
            if downloaded is not None:
                resume_folder, resumed_from = downloaded.path, resumed_from | {"commit": downloaded.commit}
                check_downloaded(accelerator, downloaded)
            check_checkpoint(
                accelerator, resume_folder, settings=training_settings(args), trust_checkpoint=args.trust_checkpoint
            )
    run = Run(
        args=args,
        accelerator=accelerator,
        output=output,
        splits=splits,
        fusion=fusion,
        synthetic=is_synthetic(args.dataset_name),
        num_workers=args.dataloader_num_workers
        if args.dataloader_num_workers is not None
        else default_num_workers(int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))),
        checkpoint=resume_folder,
        resumed_from=resumed_from,
    )
    logger.info(describe_run(run))
    logger.info(
        f"Process {accelerator.process_index} of {accelerator.num_processes} on {accelerator.device} "
        f"({accelerator.distributed_type.value}), {run.num_workers} data loader workers",
        main_process_only=False,
    )
    try:
        if args.baseline is not None:
            run_baseline(run)
        else:
            run_model(run, options)
        accelerator.wait_for_everyone()
        accelerator.end_training()
        if accelerator.is_main_process:
            output.finish()
        # After the last collective call: the other processes never wait for the push.
        if run.hub is not None:
            url = run.hub.push_final()
            logger.info(f"Pushed the {len(output.files_of(MODEL_FOLDER))} files this run wrote in model/ to {url}")
    finally:
        if run.hub is not None:
            run.hub.close()


def check_downloaded(accelerator: Accelerator, downloaded: DownloadedCheckpoint) -> None:
    """Refuse to resume when the processes downloaded a Hub checkpoint from different commits (a push in between);
    log the files the download left out."""
    commits = sorted(set(gather_object([downloaded.commit])))
    if len(commits) > 1:
        raise CheckpointError(
            f"The processes downloaded --resume_from_checkpoint from different commits ({', '.join(commits)}): the "
            f"repo changed meanwhile; resume with --hub_revision {commits[0]} (or another of them)."
        )
    if downloaded.skipped:
        logger.info(f"Left out of the download, as a resume does not read them: {', '.join(downloaded.skipped)}")


def make_accelerator(args: argparse.Namespace) -> Accelerator:
    """The `Accelerator`, after making sure the launched processes form one group (else a `UsageError`).

    On a machine without GPUs, processes started by `--multi_gpu` run as CPU processes over gloo
    (Accelerate would otherwise start each as a run of its own, all writing the same outputs).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1 and "MASTER_ADDR" in os.environ and "ACCELERATE_MIXED_PRECISION" in os.environ:
        raise UsageError(f"`accelerate launch` was given several processes but started one: {HOW_TO_LAUNCH}")
    on_gpu = torch.cuda.is_available() and not parse_flag_from_env("ACCELERATE_USE_CPU")
    accelerator = Accelerator(
        cpu=world_size > 1 and not torch.cuda.is_available(),
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        # "auto" is bf16 on a GPU that has it, else Accelerate's own setting; read before the
        # Accelerator exists, as creating accelerate's state first would fix it before ACCELERATE_USE_CPU applies.
        mixed_precision=("bf16" if on_gpu and torch.cuda.is_bf16_supported() else None)
        if args.mixed_precision == "auto"
        else args.mixed_precision,
        dynamo_backend=args.torch_compile_backend if args.torch_compile else None,
        log_with=args.report_to if args.with_tracking else None,
        # TensorBoard writes into logs/PROJECT: one entry of the run's, whatever the project is named.
        project_config=ProjectConfiguration(project_dir=args.output_dir, logging_dir=Path(args.output_dir) / LOGS_FOLDER),
        # A sampler seeded per epoch: the same order on every process, and after a resume.
        dataloader_config=DataLoaderConfiguration(
            use_seedable_sampler=True, data_seed=args.seed, non_blocking=torch.cuda.is_available()
        ),
    )
    if accelerator.num_processes != world_size:
        raise UsageError(
            f"{world_size} processes were launched but they do not form one group (this one sees "
            f"{accelerator.num_processes}): {HOW_TO_LAUNCH}"
        )
    for name, wanted in (("FSDP", DistributedType.FSDP), ("DeepSpeed", DistributedType.DEEPSPEED)):
        if parse_flag_from_env(f"ACCELERATE_USE_{name.upper()}") and accelerator.distributed_type != wanted:
            raise UsageError(
                f"{name} was asked for, but Accelerate {accelerate.__version__} runs these processes as "
                f"{accelerator.distributed_type.value}: it shards only across GPUs, and on CPUs would silently "
                f"train unsharded. Run {name} on GPUs, or launch without it."
            )
    return accelerator


def setup_logging(accelerator: Accelerator) -> None:
    """INFO logs from this script on the main process; library warnings only, and errors only elsewhere."""
    configure_logging()
    if accelerator.is_local_main_process:
        datasets.utils.logging.set_verbosity_warning()
        transformers.utils.logging.set_verbosity_warning()
    else:
        datasets.utils.logging.set_verbosity_error()
        transformers.utils.logging.set_verbosity_error()
        # The data's warnings too (the SYNTHETIC sample's, each process loading it): said once, not per process. The
        # run's own lines stay: each process says which it is.
        logging.getLogger("fiberbench.data").setLevel(logging.ERROR)
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def describe_run(run: Run) -> str:
    """The first log line: what is trained (or run) on what, and whether the data is SYNTHETIC."""
    args = run.args
    if args.baseline is not None:
        what = f"the {args.baseline.replace('_', '-')} baseline"
    elif args.model_name_or_path is None:
        what = f"a tiny {run.fusion}-fusion model built from the tokenizer shipped with the package"
    else:
        what = f"{args.model_name_or_path} ({run.fusion}-fusion)"
    if args.dataset_name is None:
        data = "the bundled SYNTHETIC sample"
    else:
        data = args.dataset_name + (" (SYNTHETIC: built from the bundled sample)" if run.synthetic else "")
    if args.sample_demo:
        return (
            f"Main job: no --model_name_or_path and no --dataset_name given, so {what} on {data}, offline, "
            f"with the settings of training/configs/sample_demo.yaml; results in {args.output_dir}"
        )
    action = "Training and evaluating" if args.do_train and args.baseline is None else "Evaluating"
    return f"{action} {what} on {data}; results in {args.output_dir}"


def make_results(run: Run, **parts) -> dict:
    """results.json: the settings that identify the run, then `parts` (scores per split, training, ...)."""
    args, accelerator = run.args, run.accelerator
    return {
        # `complete` only in the final results: a killed run's file says it is unfinished.
        "state": RUNNING,
        "model_name_or_path": args.model_name_or_path,
        "baseline": args.baseline,
        "dataset_name": args.dataset_name or "bundled sample",
        "dataset_config_name": args.dataset_config_name,
        "synthetic": run.synthetic,
        "fusion": run.fusion,
        "single_feature": args.single_feature,
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        "resumed_from": run.resumed_from,
        "arguments": {key: value for key, value in vars(args).items() if key != "hub_token"},
        **parts,
    }


def write_final_outputs(run: Run, results: dict, records: list[dict]) -> None:
    """predictions.jsonl and results.json (main process), and the results table on stdout."""
    output = run.output
    results["state"] = COMPLETE
    write_jsonl(output.entry(PREDICTIONS_FILE), records)
    write_json(output.entry(RESULTS_FILE), results)
    tables = {name: results[name] for name in EVAL_SPLITS if name in results}
    print(format_results_table(f"FIBER results ({output.path / RESULTS_FILE})", tables), flush=True)


def run_baseline(run: Run) -> None:
    """The most-frequent-answer baseline: the same outputs as a model run, from the main process."""
    if not run.accelerator.is_main_process:
        return
    run.output.claim()
    answer = most_frequent_answer(run.splits["train"]["label"])
    logger.info(f"Most frequent training answer: {answer!r}")
    metric = load_metric()
    scores, records = {}, []
    for name in run.evaluated_splits:
        split = run.splits[name]
        outputs = [{"index": i, "prediction": answer, "candidates": [answer]} for i in range(len(split))]
        scores[name], split_records = score(metric, split, outputs, name)
        records += split_records
    write_final_outputs(run, make_results(run, answer=answer, **scores), records)


def run_model(run: Run, options: dict) -> None:
    """Train (unless --no-do_train) and evaluate a model; save, describe and push it."""
    args, accelerator = run.args, run.accelerator
    model, processor = build_model(args, run.fusion, options, run.video)
    num_beams = model.generation_config.num_beams
    nlp = load_spacy_pipeline(args.spacy_model) if args.only_noun_phrases else None
    evaluator = Evaluator(
        accelerator,
        processor,
        {name: run.splits[name] for name in run.evaluated_splits},
        with_video=run.with_video,
        batch_size=args.per_device_eval_batch_size,
        num_beams=num_beams,
        only_noun_phrases=args.only_noun_phrases,
        nlp=nlp,
        num_workers=run.num_workers,
    )
    if accelerator.is_main_process:
        run.output.claim()
        remove_stale_pushes(run.output)
        if args.push_to_hub:
            run.hub = HubPusher(run.output, hub_repo_id(args), args.hub_strategy, token=args.hub_token)
    accelerator.wait_for_everyone()
    training = None
    if args.do_train:
        model, training = train(run, model, processor, evaluator)
    else:
        model = prepare_for_evaluation(accelerator, model)

    scores, records = {}, []
    for name in run.evaluated_splits:
        scores[name], split_records = evaluator(model, name, f"Evaluating ({name})")
        records += split_records
    if args.do_train and training["best"] is None:
        save_model(run, model, processor)
    if not accelerator.is_main_process:
        return
    results = make_results(run, num_beams=num_beams, **scores, **({"training": training} if training else {}))
    write_final_outputs(run, results, records)
    if args.do_train:
        split = next((name for name in ("test", "validation") if name in results), None)
        write_model_card(
            run,
            {key: results[split][key] for key in CARD_METRICS} if split else {},
            split,
            final_saved_at(training, results.get("validation")),
            num_beams,
        )
        shown = run.splits[run.evaluated_splits[-1]] if run.evaluated_splits else run.splits["train"]
        print(fill_with_saved_model(run.output.path / MODEL_FOLDER, shown, run.with_video, nlp), flush=True)


@dataclasses.dataclass
class TrainingState:
    """The prepared objects of the training loop and its progress."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    lr_scheduler: torch.optim.lr_scheduler.LRScheduler
    progress: TrainingProgress
    steps_per_epoch: int
    # Wall seconds this run spent saving checkpoints and starting their pushes (for results.json).
    save_seconds: float = 0.0


def train(run: Run, model, processor: FiberProcessor, evaluator: Evaluator) -> tuple[torch.nn.Module, dict]:
    """The training loop: epochs of Adam steps with warm-up then linear decay, validation after each epoch.

    Returns the model to evaluate (the one with the best validation F1, reloaded from `model/` by
    `prepare_for_evaluation`; the last weights, as trained, when there is no validation) and the training record of
    results.json (with `step_seconds`, the mean wall time of this run's optimizer steps, and `save_seconds`, the
    time it spent saving checkpoints and starting their pushes).
    """
    args, accelerator = run.args, run.accelerator
    examples = FiberExamples(run.splits["train"], run.with_video)
    train_loader = accelerator.prepare(
        make_dataloader(
            examples,
            batch_size=args.per_device_train_batch_size,
            shuffle=True,
            seed=args.seed,
            processor=processor,
            num_workers=run.num_workers,
            pin_memory=accelerator.device.type == "cuda",
            lengths=examples.lengths(processor) if args.group_by_length else None,
        )
    )
    steps_per_epoch = math.ceil(len(train_loader) / args.gradient_accumulation_steps)
    max_train_steps = args.max_train_steps or args.num_train_epochs * steps_per_epoch
    num_epochs = math.ceil(max_train_steps / steps_per_epoch)
    num_warmup_steps = steps_per_epoch if args.num_warmup_steps is None else args.num_warmup_steps

    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=args.learning_rate,
        weight_decay=args.weight_decay,
        fused=accelerator.device.type == "cuda",
    )
    # Accelerate steps a prepared scheduler once per process at each optimizer step.
    lr_scheduler = get_scheduler(
        args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=num_warmup_steps * accelerator.num_processes,
        num_training_steps=max_train_steps * accelerator.num_processes,
    )
    model, optimizer, lr_scheduler = accelerator.prepare(model, optimizer, lr_scheduler)
    state = TrainingState(
        model, optimizer, lr_scheduler, TrainingProgress(settings=training_settings(args)), steps_per_epoch
    )
    if args.with_tracking:
        start_trackers(run)

    total_batch = args.per_device_train_batch_size * accelerator.num_processes * args.gradient_accumulation_steps
    logger.info(
        f"Training on {len(examples)} examples: {num_epochs} epochs, {max_train_steps} steps of "
        f"{total_batch} examples ({accelerator.num_processes} processes), {num_warmup_steps} warm-up steps"
    )
    if run.checkpoint is not None:
        resume(run, state, processor, max_train_steps=max_train_steps, num_epochs=num_epochs)
    progress = state.progress
    skip = batches_to_skip(progress, len(train_loader), args.gradient_accumulation_steps)
    # The steps' wall time, saves and validation left out, for results.json.
    first_step, step_seconds = progress.completed_steps, 0.0
    # Closed on an error too, so that the error's line starts a line of its own.
    with tqdm(
        total=max_train_steps,
        initial=progress.completed_steps,
        desc="Training",
        disable=not accelerator.is_local_main_process,
    ) as bar:
        for epoch in range(progress.epochs_done, num_epochs):
            train_loader.set_epoch(epoch)
            batches = accelerator.skip_first_batches(train_loader, skip) if skip else train_loader
            skip = 0
            started, saving = time.perf_counter(), state.save_seconds
            train_epoch(run, state, processor, batches, epoch, max_train_steps, bar)
            step_seconds += time.perf_counter() - started - (state.save_seconds - saving)
            improved = end_epoch(run, state, processor, evaluator, epoch)
            checkpoint = f"epoch_{epoch}" if args.checkpointing_steps == "epoch" else None
            if improved or checkpoint is not None:
                save_and_push(run, state, processor, checkpoint, f"epoch {epoch}")
            if progress.completed_steps >= max_train_steps:
                break

    steps = progress.completed_steps - first_step
    training = {
        "completed_steps": progress.completed_steps,
        "epochs": progress.history,
        "best": progress.best,
        "step_seconds": step_seconds / steps if steps else None,
        "save_seconds": state.save_seconds,
    }
    if progress.best is None:
        return model, training
    logger.info(
        f"Best validation F1 {progress.best['f1']:.2f} at epoch {progress.best['epoch']}: evaluating that model"
    )
    # The trained model, optimizer and scheduler are let go before the best model is loaded afresh
    # for evaluation: no weights are copied into prepared (possibly sharded) parameters.
    del model, optimizer, lr_scheduler, state
    accelerator.free_memory()
    best = FiberT5ForConditionalGeneration.from_pretrained(run.output.path / MODEL_FOLDER, use_safetensors=True)
    return prepare_for_evaluation(accelerator, best), training


def prepare_for_evaluation(accelerator: Accelerator, model: FiberT5ForConditionalGeneration):
    """The model to evaluate, whole on the run's device, with the run's mixed precision (and compilation).

    Not wrapped for data parallelism or sharded: nothing is trained, evaluation decodes with every
    weight on every process anyway (`decoding_model`), and FSDP2 prepares a model only together
    with its optimizer (Accelerate refuses a model alone).
    """
    return accelerator.prepare_model(model.to(accelerator.device), evaluation_mode=True)


def train_epoch(
    run: Run, state: TrainingState, processor: FiberProcessor, batches, epoch: int, max_train_steps: int, bar: tqdm
) -> None:
    """One epoch of optimizer steps (or what is left of it), with the checkpoints asked for (and their pushes).

    A loss that is not finite stops the run: the weights it would leave are useless, and
    nothing trained from then on is saved or scored.
    """
    args, accelerator, model, progress = run.args, run.accelerator, state.model, state.progress
    model.train()
    for batch in batches:
        if progress.completed_steps >= max_train_steps:
            break
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            # One device sync per step, small next to the step itself.
            if not torch.isfinite(loss):
                raise TrainingDivergedError(
                    f"The training loss became {loss.item()} at step {progress.completed_steps + 1} (epoch {epoch}); "
                    f"stopping. Lower --learning_rate (now {args.learning_rate:g}) or check the data; what this "
                    "run saved before is intact."
                )
            accelerator.backward(loss)
            state.optimizer.step()
            state.lr_scheduler.step()
            state.optimizer.zero_grad()
        progress.add_loss(loss.detach())
        if accelerator.sync_gradients:
            progress.completed_steps += 1
            bar.update(1)
            if isinstance(args.checkpointing_steps, int) and progress.completed_steps % args.checkpointing_steps == 0:
                step = progress.completed_steps
                save_and_push(run, state, processor, f"step_{step}", f"step {step}")


def end_epoch(run: Run, state: TrainingState, processor: FiberProcessor, evaluator: Evaluator, epoch: int) -> bool:
    """After an epoch: validation, the best model so far, the epoch's record in results.json and the tracker.

    Returns whether a new best model was saved.
    """
    args, accelerator, progress = run.args, run.accelerator, state.progress
    loss = accelerator.reduce(torch.tensor(progress.take_epoch_loss(), device=accelerator.device), "mean").item()
    record = {
        "epoch": epoch,
        "step": progress.completed_steps,
        "train_loss": loss,
        "learning_rate": state.lr_scheduler.get_last_lr()[0],
    }
    improved = False
    if args.do_eval:
        record["validation"], _ = evaluator(state.model, "validation", f"Validation (epoch {epoch})")
        if progress.best is None or record["validation"]["f1"] > progress.best["f1"]:
            progress.best = {"epoch": epoch, "step": progress.completed_steps, "f1": record["validation"]["f1"]}
            save_model(run, state.model, processor)
            improved = True
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
            run.output.entry(RESULTS_FILE),
            make_results(run, training={"epochs": progress.history, "best": progress.best}),
        )
    return improved


def save_and_push(
    run: Run, state: TrainingState, processor: FiberProcessor, checkpoint: str | None, description: str
) -> None:
    """Save `checkpoint` (if any), then push the save (`push_save`); the time it takes goes to `state.save_seconds`."""
    started = time.perf_counter()
    if checkpoint is not None:
        save_checkpoint(run.accelerator, run.output, checkpoint, state.progress)
    push_save(run, state, processor, checkpoint, description)
    state.save_seconds += time.perf_counter() - started


def push_save(
    run: Run, state: TrainingState, processor: FiberProcessor, checkpoint: str | None, description: str
) -> None:
    """After a save (a new best model, a checkpoint), with --hub_strategy other than end: push the model, its card
    and the checkpoint in the background (`HubPusher`; `description`, e.g. "step 30", names the push); called on
    every process.

    The pushed model is `model/`, the best by validation F1 so far; before validation has chosen
    one, the current weights are saved there first, so that every push holds a model.
    """
    args, progress = run.args, state.progress
    if not args.push_to_hub or args.hub_strategy == "end":
        return
    if progress.best is None:
        save_model(run, state.model, processor)
        saved_at = SavedAt(progress.completed_steps, progress.completed_steps / state.steps_per_epoch, final=False)
    else:
        saved_at = best_saved_at(progress.best, progress.history, final=False)
    if run.hub is not None:
        num_beams = run.accelerator.unwrap_model(state.model).generation_config.num_beams
        scores = {key: saved_at.validation[key] for key in CARD_METRICS} if saved_at.validation else {}
        write_model_card(run, scores, "validation", saved_at, num_beams)
        run.hub.push(checkpoint, description)


def best_saved_at(best: dict, history: list[dict], *, final: bool) -> SavedAt:
    """The training state of the best model: saved at the end of epoch `best["epoch"]`, after its validation."""
    record = next(record for record in history if record["epoch"] == best["epoch"])
    return SavedAt(best["step"], best["epoch"] + 1, record.get("validation"), final=final)


def final_saved_at(training: dict, validation: dict | None) -> SavedAt:
    """The training state of the final model: the best one, or the last weights when nothing chose one."""
    if training["best"] is not None:
        return best_saved_at(training["best"], training["epochs"], final=True)
    return SavedAt(training["completed_steps"], len(training["epochs"]), validation, final=True)


def resume(run: Run, state: TrainingState, processor: FiberProcessor, *, max_train_steps: int, num_epochs: int) -> None:
    """Load a checkpoint's state and progress, and put back the best model it was saved with (weights only).

    A checkpoint past this run's end (more steps or epochs done than the run has) is refused before
    anything is written: resuming it would train nothing and replace the outputs.
    """
    checkpoint = run.checkpoint
    commit = run.resumed_from.get("commit")
    logger.info(
        f"Resuming from {run.args.resume_from_checkpoint}"
        + (f" (commit {commit}, downloaded into {checkpoint})" if commit else "")
    )
    state.progress = load_checkpoint(
        run.accelerator, checkpoint, settings=training_settings(run.args), trust_checkpoint=run.args.trust_checkpoint
    )
    if state.progress.completed_steps > max_train_steps or state.progress.epochs_done > num_epochs:
        raise CheckpointError(
            f"{checkpoint} is past this run's end ({state.progress.completed_steps} steps and "
            f"{state.progress.epochs_done} epochs done; this run has {max_train_steps} steps in {num_epochs} "
            "epochs): a checkpoint of other settings?"
        )
    if state.progress.best is not None:
        try:
            best = FiberT5ForConditionalGeneration.from_pretrained(
                checkpoint / BEST_MODEL_IN_CHECKPOINT, use_safetensors=True
            )
        except (OSError, ValueError, SafetensorError) as error:
            raise CheckpointError(
                f"{checkpoint / BEST_MODEL_IN_CHECKPOINT} cannot be loaded: {type(error).__name__}: {error}"
            ) from error
        save_model(run, best, processor)


def start_trackers(run: Run) -> None:
    """Start the --report_to trackers under --tracker_project_name, and log where their logs go."""
    args, accelerator = run.args, run.accelerator
    if accelerator.is_main_process and args.report_to in ("tensorboard", "all"):
        run.output.entry(LOGS_FOLDER)
    scalars = {key: value for key, value in vars(args).items() if isinstance(value, (int, float, str, bool))}
    accelerator.init_trackers(args.tracker_project_name, scalars)
    for tracker in accelerator.trackers:
        where = getattr(tracker, "logging_dir", None) or f"project {args.tracker_project_name!r}"
        logger.info(f"Logging metrics to {tracker.name}: {where}")


def save_model(run: Run, model, processor: FiberProcessor) -> None:
    """`save_pretrained` of the model (safetensors, config, generation config, code files) and its processor.

    Into `model/` atomically: the previous best model stays whole until the new one is complete.
    Sharded (FSDP, DeepSpeed) weights are gathered into a full state dict first, on every process.
    """
    accelerator = run.accelerator
    sharded = accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)
    state_dict = accelerator.get_state_dict(model) if sharded else None
    if accelerator.is_main_process:
        unwrapped = accelerator.unwrap_model(model, keep_torch_compile=False)
        try:
            with run.output.atomic_entry(MODEL_FOLDER) as staging:
                unwrapped.save_pretrained(staging, state_dict=state_dict)
                processor.save_pretrained(staging)
        except (RuntimeError, SafetensorError) as error:
            raise OSError(f"Could not save the model into {run.output.path / MODEL_FOLDER}: {error}") from error
    accelerator.wait_for_everyone()


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


def write_model_card(run: Run, scores: dict, split: str | None, saved_at: SavedAt, num_beams: int) -> None:
    """The model card of `model/` (README.md with the Hub's YAML metadata): headline `scores` on `split`, and
    which step and epoch the model holds (main process)."""
    args = run.args
    card = make_model_card(
        scores,
        base_model=args.model_name_or_path,
        dataset_name=args.dataset_name or SAMPLE_DATASET_NAME,
        fusion=run.fusion,
        hyperparameters={key: getattr(args, key) for key in CARD_HYPERPARAMETERS}
        | {"num_beams": num_beams, "num_processes": run.accelerator.num_processes},
        model_name=hub_repo_id(args),
        dataset_config=args.dataset_config_name,
        split=split or "test",
        single_feature=args.single_feature,
        synthetic=run.synthetic,
        saved_at=saved_at,
    )
    write_text(run.output.add_file(MODEL_FOLDER, "README.md"), card)


def flat_scalars(record: dict, prefix: str = "") -> dict:
    """A nested record's numbers under "a/b" names (for logs and TensorBoard)."""
    flat = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat |= flat_scalars(value, f"{prefix}{key}/")
        elif isinstance(value, (int, float)):
            flat[f"{prefix}{key}"] = value
    return flat
