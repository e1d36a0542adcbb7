"""What a `train.py` run saves and resumes from: the model folder `model/` and its card, `results.json`, a checkpoint.

The checkpoint folders themselves (what they hold, how they are checked) are `checkpointing.py`'s;
the pushes of what is saved here, `hub_checkpoints.py`'s.
"""

from accelerate.utils import DistributedType
from accelerate.logging import get_logger
from safetensors import SafetensorError

from fiberbench.files import write_json, write_jsonl, write_text
from fiberbench.modeling import FiberProcessor, FiberT5ForConditionalGeneration
from fiberbench.ownership import COMPLETE, RUNNING
from fiberbench.training.arguments import hub_repo_id, training_settings
from fiberbench.training.checkpointing import BEST_MODEL_IN_CHECKPOINT, CheckpointError, load_checkpoint
from fiberbench.training.context import EVAL_SPLITS, Run, TrainingState
from fiberbench.training.model_card import CARD_HYPERPARAMETERS, SavedAt, make_model_card
from fiberbench.training.outputs import MODEL_FOLDER, PREDICTIONS_FILE, RESULTS_FILE, format_results_table

logger = get_logger(__name__)

# What the model card names as the dataset when none is given: the main job's.
SAMPLE_DATASET_NAME = "fiberbench-bundled-sample"
# The card's headline scores, as `fiber_metric` names them in results.json.
CARD_METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "map")


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


def write_model_card(run: Run, scores: dict, split: str | None, saved_at: SavedAt, num_beams: int) -> None:
    """The model card of `model/` (README.md with the Hub's YAML metadata): headline `scores` on `split`, and
    which step and epoch the model holds (main process)."""
    args = run.args
    settings = vars(args) | {"num_beams": num_beams, "num_processes": run.accelerator.num_processes}
    card = make_model_card(
        {key: scores[key] for key in CARD_METRICS if key in scores},
        base_model=args.model_name_or_path,
        dataset_name=args.dataset_name or SAMPLE_DATASET_NAME,
        fusion=run.fusion,
        hyperparameters={key: settings[key] for key in CARD_HYPERPARAMETERS},
        model_name=hub_repo_id(args),
        dataset_config=args.dataset_config_name,
        split=split or "test",
        single_feature=args.single_feature,
        synthetic=run.synthetic,
        saved_at=saved_at,
    )
    write_text(run.output.add_file(MODEL_FOLDER, "README.md"), card)


def best_saved_at(best: dict, history: list[dict], *, final: bool) -> SavedAt:
    """The training state of the best model: saved at the end of epoch `best["epoch"]`, after its validation."""
    record = next(record for record in history if record["epoch"] == best["epoch"])
    return SavedAt(best["step"], best["epoch"] + 1, record.get("validation"), final=final)


def final_saved_at(training: dict, validation: dict | None) -> SavedAt:
    """The training state of the final model: the best one, or the last weights when nothing chose one."""
    if training["best"] is not None:
        return best_saved_at(training["best"], training["epochs"], final=True)
    return SavedAt(training["completed_steps"], len(training["epochs"]), validation, final=True)


def save_for_push(run: Run, state: TrainingState, processor: FiberProcessor) -> None:
    """Before a save is pushed (`Run.pushes_each_save`): `model/` and its card as the push sends them; called on
    every process.

    The pushed model is `model/`, the best by validation F1 so far; before validation has chosen
    one, the current weights are saved there first, so that every push holds a model.
    """
    progress = state.progress
    if progress.best is None:
        save_model(run, state.model, processor)
        saved_at = SavedAt(progress.completed_steps, progress.completed_steps / state.steps_per_epoch, final=False)
    else:
        saved_at = best_saved_at(progress.best, progress.history, final=False)
    if run.accelerator.is_main_process:
        num_beams = run.accelerator.unwrap_model(state.model).generation_config.num_beams
        write_model_card(run, saved_at.validation or {}, "validation", saved_at, num_beams)


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
