"""The training loop of a `train.py` run: epochs of optimizer steps, validation after each, the saves asked for.

`train` prepares the data, optimizer and schedule with Accelerate, resumes from a checkpoint if
one was given, and returns the model to evaluate with the run's training record.
"""

import math
import time

import torch
from accelerate import Accelerator
from accelerate.logging import get_logger
from tqdm.auto import tqdm
from transformers import get_scheduler

from fiberbench.errors import FiberbenchError
from fiberbench.files import write_json
from fiberbench.modeling import FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.training.arguments import training_settings
from fiberbench.training.checkpointing import TrainingProgress, batches_to_skip, save_checkpoint
from fiberbench.training.context import Run, TrainingState
from fiberbench.training.evaluation import Evaluator
from fiberbench.training.inputs import FiberExamples, make_dataloader
from fiberbench.training.outputs import LOGS_FOLDER, MODEL_FOLDER, RESULTS_FILE
from fiberbench.training.saving import make_results, resume, save_for_push, save_model

logger = get_logger(__name__)


class TrainingDivergedError(FiberbenchError):
    """The training loss became NaN or infinite: the run stops rather than save or score broken weights."""


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
            worker_context=run.worker_context,
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
    """Save `checkpoint` (if any), then, with --hub_strategy other than end, push the save in the background
    (`HubPusher`; `description`, e.g. "step 30", names the push); called on every process. The time it takes goes to
    `state.save_seconds`."""
    started = time.perf_counter()
    if checkpoint is not None:
        save_checkpoint(run.accelerator, run.output, checkpoint, state.progress)
    if run.pushes_each_save:
        save_for_push(run, state, processor)
        if run.hub is not None:
            run.hub.push(checkpoint, description)
    state.save_seconds += time.perf_counter() - started


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


def flat_scalars(record: dict, prefix: str = "") -> dict:
    """A nested record's numbers under "a/b" names (for logs and TensorBoard)."""
    flat = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat |= flat_scalars(value, f"{prefix}{key}/")
        elif isinstance(value, (int, float)):
            flat[f"{prefix}{key}"] = value
    return flat
