"""Resumable training state: what a checkpoint holds beyond Accelerate's, and how a run picks up from one."""

import dataclasses
import shutil
from pathlib import Path

# Inside a checkpoint folder: a copy of the best model so far, so that a run resumed from the
# checkpoint keeps the same best model as the run that wrote it.
BEST_MODEL_IN_CHECKPOINT = "best_model"


@dataclasses.dataclass
class TrainingProgress:
    """The loop's own state, saved in every checkpoint through `accelerator.register_for_checkpointing`.

    Attributes:
        completed_steps: optimizer steps done.
        epochs_done: epochs whose evaluation is done (a checkpoint taken at the last step of an
            epoch still has that epoch's evaluation ahead of it).
        loss_sum, loss_count: training loss of the current epoch so far, on this process.
        history: one record per finished epoch (step, training loss, validation metrics).
        best: the epoch with the best validation F1 so far, or None.
    """

    completed_steps: int = 0
    epochs_done: int = 0
    loss_sum: float = 0.0
    loss_count: int = 0
    history: list = dataclasses.field(default_factory=list)
    best: dict | None = None

    def add_loss(self, loss) -> None:
        """Add one batch's loss (a detached tensor: summing on the device avoids a sync per step)."""
        self.loss_sum = self.loss_sum + loss
        self.loss_count += 1

    def take_epoch_loss(self) -> float:
        """This process's mean training loss of the epoch, resetting the sums for the next one."""
        mean = float(self.loss_sum) / max(self.loss_count, 1)
        self.loss_sum, self.loss_count = 0.0, 0
        return mean

    def state_dict(self) -> dict:
        """What `accelerator.save_state` pickles; `loss_sum` may be a device tensor, saved as a float."""
        return {**dataclasses.asdict(self), "loss_sum": float(self.loss_sum)}

    def load_state_dict(self, state: dict) -> None:
        """Called by `accelerator.load_state`: put back every field of `state_dict`."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, state[field.name])


def save_checkpoint(accelerator, folder: Path, best_model_dir: Path) -> None:
    """`accelerator.save_state` (model, optimizer, scheduler, RNG, sampler, progress) plus the best model so far.

    Written atomically: every process saves into a hidden staging folder beside `folder`, which the
    main process renames once all are done, so a run killed while saving leaves no folder that
    `--resume_from_checkpoint` would take for a complete checkpoint.
    """
    staging = folder.with_name(f".{folder.name}.partial")
    if accelerator.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(staging))
    if accelerator.is_main_process and (best_model_dir / "config.json").is_file():
        shutil.copytree(best_model_dir, staging / BEST_MODEL_IN_CHECKPOINT)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    accelerator.wait_for_everyone()


def resume(accelerator, checkpoint: Path, progress: TrainingProgress, best_model_dir: Path) -> None:
    """Load a checkpoint's state, and put back the best model it was saved with."""
    accelerator.load_state(str(checkpoint))
    saved_best = checkpoint / BEST_MODEL_IN_CHECKPOINT
    if progress.best is not None:
        if not saved_best.is_dir():
            raise FileNotFoundError(
                f"{checkpoint} records a best model (epoch {progress.best['epoch']}) "
                f"but has no {BEST_MODEL_IN_CHECKPOINT}/ folder."
            )
        if accelerator.is_main_process:
            shutil.copytree(saved_best, best_model_dir, dirs_exist_ok=True)
    accelerator.wait_for_everyone()


def batches_to_skip(progress: TrainingProgress, batches_per_epoch: int, gradient_accumulation_steps: int) -> int:
    """How many batches of the epoch being resumed the checkpoint had already trained on."""
    steps_per_epoch = -(-batches_per_epoch // gradient_accumulation_steps)
    steps_into_epoch = progress.completed_steps - progress.epochs_done * steps_per_epoch
    return min(steps_into_epoch * gradient_accumulation_steps, batches_per_epoch)
