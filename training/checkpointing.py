"""Resumable training state: what a checkpoint holds beyond Accelerate's, and how a run picks up from one.

A checkpoint folder (`step_N/` or `epoch_N/`) holds what `accelerator.save_state` writes (the
model as safetensors; optimizer, scheduler and RNG states as torch files), the loop's own
progress as JSON (`training_progress.json`), and the best model so far (`best_model/`). Resuming
executes nothing from it: the progress is JSON, the weights safetensors, and the torch files are
loaded with `weights_only=True` (tensors, numbers and containers only); a pickle that asks for
anything else, any other pickle, and a damaged weights or state file stop the resume with one
line before anything is written. `is_trusted_file` is that rule for a single file: a checkpoint on
the Hub is downloaded only where it says yes.
"""

import contextlib
import dataclasses
import json
import math
import pickle
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch
from accelerate.utils import broadcast_object_list, load
from accelerate.utils.other import TORCH_SAFE_GLOBALS
from safetensors import SafetensorError, safe_open

from fiberbench.errors import DataError, FiberbenchError
from fiberbench.ownership import differences, names_pattern
from fiberbench.training.outputs import MODEL_FOLDER

# Inside a checkpoint folder: the loop's progress, and a copy of the best model so far, so that a
# run resumed from the checkpoint keeps the same best model as the run that wrote it.
PROGRESS_FILE = "training_progress.json"
BEST_MODEL_IN_CHECKPOINT = "best_model"
# Accelerate's RNG states are pickles (random_states_N.pkl), loaded with weights_only=True; a
# pickle by any other name (e.g. custom_checkpoint_0.pkl, which Accelerate unpickles with
# weights_only=False) is never written by this script.
RNG_STATE_FILE = "random_states_{}.pkl"
# Accelerate's state files (`save_state`), torch pickles that `load_state` reads with weights_only=True.
STATE_FILES = re.compile(r"(optimizer|scheduler|sampler|dl_state_dict)(_\d+)?\.bin|scaler\.pt|random_states_\d+\.pkl")
# The files of a checkpoint that a resume reads without running code: the progress, the weights, the state
# files, and the best model's weights and JSON files (never its code files).
TRUSTED_FILES = names_pattern(
    PROGRESS_FILE,
    re.compile(r"model(_\d+)?\.safetensors"),
    STATE_FILES,
    re.compile(rf"{re.escape(BEST_MODEL_IN_CHECKPOINT)}/[^/]+\.(safetensors|json)"),
)
# Files that torch or Python unpickle when they are loaded.
PICKLE_SUFFIXES = (".pkl", ".pickle", ".bin", ".pt", ".pth", ".ckpt")


class CheckpointError(FiberbenchError):
    """A checkpoint that cannot be written, or one that cannot be trusted or read back."""


@dataclasses.dataclass
class TrainingProgress:
    """The loop's own state, saved as JSON in every checkpoint.

    Attributes:
        completed_steps: optimizer steps done.
        epochs_done: epochs whose evaluation is done (a checkpoint taken at the last step of an
            epoch still has that epoch's evaluation ahead of it).
        loss_sum, loss_count: training loss of the current epoch so far, on this process.
        history: one record per finished epoch (step, training loss, validation metrics).
        best: the epoch with the best validation F1 so far, or None.
        settings: the run's training settings (`arguments.training_settings`): a checkpoint
            resumes only with the same.
    """

    completed_steps: int = 0
    epochs_done: int = 0
    loss_sum: float = 0.0
    loss_count: int = 0
    history: list = dataclasses.field(default_factory=list)
    best: dict | None = None
    settings: dict = dataclasses.field(default_factory=dict)

    def add_loss(self, loss: torch.Tensor) -> None:
        """Add one batch's loss (a detached tensor: summing on the device avoids a sync per step)."""
        self.loss_sum = self.loss_sum + loss
        self.loss_count += 1

    def take_epoch_loss(self) -> float:
        """This process's mean training loss of the epoch, resetting the sums for the next one."""
        mean = float(self.loss_sum) / max(self.loss_count, 1)
        self.loss_sum, self.loss_count = 0.0, 0
        return mean

    def to_json(self, loss_sums: list[float], loss_counts: list[int]) -> dict:
        """The JSON record of a checkpoint; the epoch's loss sums and counts are those of every process."""
        return {
            "completed_steps": self.completed_steps,
            "epochs_done": self.epochs_done,
            "history": self.history,
            "best": self.best,
            "settings": self.settings,
            "loss_sums": loss_sums,
            "loss_counts": loss_counts,
        }

    @classmethod
    def from_json(cls, path: Path, process_index: int, num_processes: int) -> "TrainingProgress":
        """Read a checkpoint's progress file, checking every field (a `DataError` names the field)."""
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise CheckpointError(f"{path.parent}: not a checkpoint of train.py (no {path.name}).") from error
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise DataError(f"{path}: not valid JSON ({error}).") from error
        checks = {
            "completed_steps": lambda value: isinstance(value, int) and value >= 0,
            "epochs_done": lambda value: isinstance(value, int) and value >= 0,
            "history": lambda value: isinstance(value, list) and all(isinstance(item, dict) for item in value),
            "best": lambda value: (
                value is None or (isinstance(value, dict) and isinstance(value.get("f1"), float | int))
            ),
            # Finite numbers: a NaN here would reach results.json (Python's json reads NaN).
            "loss_sums": lambda value: isinstance(value, list)
            and all(isinstance(item, float | int) and math.isfinite(item) for item in value),
            "loss_counts": lambda value: isinstance(value, list) and all(isinstance(item, int) and item >= 0 for item in value),
            "settings": lambda value: isinstance(value, dict),
        }
        if not isinstance(record, dict):
            raise DataError(f"{path}: expected a JSON object, got {type(record).__name__}.")
        for field, is_valid in checks.items():
            if field not in record or not is_valid(record[field]):
                raise DataError(f"{path}: field {field} is missing or invalid ({record.get(field)!r:.80}).")
        if len(record["loss_sums"]) != num_processes or len(record["loss_counts"]) != num_processes:
            raise CheckpointError(
                f"{path.parent} was written by {len(record['loss_sums'])} processes; resume it with as many "
                f"(this run has {num_processes})."
            )
        return cls(
            completed_steps=record["completed_steps"],
            epochs_done=record["epochs_done"],
            loss_sum=float(record["loss_sums"][process_index]),
            loss_count=record["loss_counts"][process_index],
            history=record["history"],
            best=record["best"],
            settings=record["settings"],
        )


@contextlib.contextmanager
def shared_atomic_folder(accelerator, output, name: str) -> Iterator[Path]:
    """`output.atomic_entry(name)` for a folder that every process writes into (a checkpoint).

    The main process creates the staging folder and tells the others its path; it is renamed into
    place once every process is done.
    """
    if accelerator.is_main_process:
        with output.atomic_entry(name) as staging:
            broadcast_object_list([str(staging)])
            yield staging
            accelerator.wait_for_everyone()
    else:
        staging = Path(broadcast_object_list([None])[0])
        yield staging
        accelerator.wait_for_everyone()
    accelerator.wait_for_everyone()


def save_checkpoint(accelerator, output, name: str, progress: TrainingProgress) -> None:
    """`accelerator.save_state` (model, optimizer, scheduler, RNG), the progress as JSON and the best model so far.

    Written atomically (see `shared_atomic_folder`): a run killed or out of disk space while
    saving leaves the previous checkpoints as they were and no folder that looks complete.
    """
    local_loss = torch.tensor([float(progress.loss_sum), float(progress.loss_count)], device=accelerator.device)
    losses = accelerator.gather(local_loss[None]).cpu().tolist()
    try:
        with shared_atomic_folder(accelerator, output, name) as staging:
            accelerator.save_state(str(staging))
            if accelerator.is_main_process:
                record = progress.to_json([loss for loss, _ in losses], [int(count) for _, count in losses])
                (staging / PROGRESS_FILE).write_text(json.dumps(record, allow_nan=False), encoding="utf-8")
                if progress.best is not None:
                    _copy_weights_and_json(output.path / MODEL_FOLDER, staging / BEST_MODEL_IN_CHECKPOINT)
    except (OSError, RuntimeError, SafetensorError) as error:
        # torch.save reports a full disk as a RuntimeError ("PytorchStreamWriter failed writing file").
        free = shutil.disk_usage(output.path).free / 2**20
        raise CheckpointError(
            f"Could not save the checkpoint {output.path / name} ({free:.0f} MiB free on that disk): "
            f"{_first_line(error)}; the previous checkpoints are as they were."
        ) from error


def _copy_weights_and_json(source: Path, destination: Path) -> None:
    """Copy a saved model's weights and JSON files (never its code files) into `destination`."""
    destination.mkdir()
    for file in sorted(source.iterdir()):
        if file.is_file() and file.suffix in (".safetensors", ".json"):
            destination.joinpath(file.name).write_bytes(file.read_bytes())


def is_sharded_file(relative: str) -> bool:
    """Whether a checkpoint's file (its path in the folder) is part of an FSDP sharded checkpoint."""
    return Path(relative).name == ".metadata" or relative.endswith(".distcp")


def is_trusted_file(relative: str, *, trust_checkpoint: bool = False) -> bool | None:
    """Whether a resume may read a checkpoint's file (its path in the folder, "best_model/config.json").

    True: a file train.py writes that loads without running code (`TRUSTED_FILES`), or, with
    `trust_checkpoint`, a file of a sharded checkpoint. False: a pickle of any other name, or a
    sharded file not trusted: the checkpoint is refused. None: a file a resume does not read (a
    README, say), which a download leaves out.
    """
    if TRUSTED_FILES.fullmatch(relative):
        return True
    if is_sharded_file(relative):
        return trust_checkpoint
    return False if relative.endswith(PICKLE_SUFFIXES) else None


def refuse_untrusted(checkpoint: str | Path, relative: str, *, trust_checkpoint: bool = False) -> None:
    """Raise the `CheckpointError` that refuses a checkpoint for its file `relative` (`is_trusted_file` said no)."""
    if is_sharded_file(relative):
        raise CheckpointError(
            f"{checkpoint}/{relative}: a sharded (torch distributed) checkpoint, whose loading unpickles its metadata "
            f"and can run code; resume from {checkpoint} only if you wrote it, with --trust_checkpoint."
        )
    raise CheckpointError(
        f"{checkpoint}/{relative}: a pickle that train.py never writes; refusing to resume from {checkpoint} "
        "(a pickle can run any code when loaded)."
    )


def check_checkpoint_files(checkpoint: Path, num_processes: int, *, trust_checkpoint: bool = False) -> None:
    """Refuse a checkpoint folder holding a pickle this script never writes, or a damaged or unsafe weights or
    state file (before anything is loaded, or written).

    FSDP's sharded checkpoints are torch's distributed checkpoint format, whose loader unpickles
    its `.metadata` file and any non-tensor entry: they are read only with `trust_checkpoint`
    (--trust_checkpoint), for checkpoints one wrote oneself. A state file's pickle is read for
    the objects it would create, without creating them (torch's `get_unsafe_globals_in_checkpoint`);
    a safetensors file's header must describe the whole file.
    """
    files = sorted(path for path in checkpoint.rglob("*") if path.is_file())
    expected = {RNG_STATE_FILE.format(index) for index in range(num_processes)}
    for file in files:
        relative = file.relative_to(checkpoint).as_posix()
        trusted = is_trusted_file(relative, trust_checkpoint=trust_checkpoint)
        if trusted is False or (file.suffix == ".pkl" and relative not in expected):
            refuse_untrusted(checkpoint, relative, trust_checkpoint=trust_checkpoint)
    for file in files:
        relative = file.relative_to(checkpoint).as_posix()
        if file.suffix == ".safetensors":
            try:
                with safe_open(file, "pt"):
                    pass
            except (SafetensorError, OSError) as error:
                raise CheckpointError(
                    f"{checkpoint} cannot be loaded into this run (a damaged file: {relative}: {_first_line(error)})"
                ) from error
        elif STATE_FILES.fullmatch(relative):
            _check_state_file(checkpoint, file)


def _check_state_file(checkpoint: Path, file: Path) -> None:
    """Refuse a torch state file that is damaged, or whose pickle would create anything but tensors and numbers."""
    try:
        with torch.serialization.safe_globals(TORCH_SAFE_GLOBALS):
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(file)
    except (RuntimeError, ValueError, OSError, pickle.UnpicklingError) as error:
        raise CheckpointError(
            f"{checkpoint} cannot be loaded into this run (a damaged file: {file.name}: {_first_line(error)})"
        ) from error
    if unsafe:
        raise CheckpointError(
            f"{file} holds more than tensors and numbers ({', '.join(unsafe[:3])}), refused unread as "
            "torch.load(weights_only=True) refuses it (a pickle can run any code when loaded)."
        )


def check_checkpoint(accelerator, checkpoint: Path, *, settings: dict, trust_checkpoint: bool = False) -> None:
    """Check a checkpoint's pickles and progress file before the run writes anything (see `load_checkpoint`).

    A checkpoint saved by a run with other training `settings` is refused, naming the differences:
    resumed, it would train on its own schedule while the results claim the new settings.

    Accelerate skips RNG states it cannot load with only a log line, and the resumed run would then
    silently differ from an uninterrupted one: this process's are loaded here first, the same way.
    """
    check_checkpoint_files(checkpoint, accelerator.num_processes, trust_checkpoint=trust_checkpoint)
    progress = TrainingProgress.from_json(
        checkpoint / PROGRESS_FILE, accelerator.process_index, accelerator.num_processes
    )
    changed = differences(settings, progress.settings)
    if changed:
        more = f"; and {len(changed) - 4} more" if len(changed) > 4 else ""
        raise CheckpointError(
            f"{checkpoint} was saved by a run with other settings ({'; '.join(changed[:4])}{more}); resume it with "
            "the settings it was saved with, or start a new run"
        )
    rng_states = checkpoint / RNG_STATE_FILE.format(accelerator.process_index)
    try:
        load(rng_states)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"{rng_states} holds more than tensors and numbers, refused unread by torch.load(weights_only=True): "
            f"{_first_line(error)}"
        ) from error
    except (RuntimeError, EOFError) as error:
        raise CheckpointError(f"{rng_states} cannot be read: {type(error).__name__}: {_first_line(error)}") from error


def load_checkpoint(
    accelerator, checkpoint: Path, *, settings: dict, trust_checkpoint: bool = False
) -> TrainingProgress:
    """Load a checkpoint's state into the prepared objects, and return the loop's progress.

    Torch files are loaded with `weights_only=True`: a file holding anything but tensors, numbers
    and containers (e.g. a pickle payload) is a `CheckpointError`, and its code never runs.
    """
    check_checkpoint(accelerator, checkpoint, settings=settings, trust_checkpoint=trust_checkpoint)
    progress = TrainingProgress.from_json(
        checkpoint / PROGRESS_FILE, accelerator.process_index, accelerator.num_processes
    )
    try:
        accelerator.load_state(str(checkpoint), load_kwargs={"weights_only": True})
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"{checkpoint}: a state file holds more than tensors and numbers, refused unread by torch.load("
            f"weights_only=True): {_first_line(error)}"
        ) from error
    except (RuntimeError, EOFError, KeyError, ValueError, SafetensorError) as error:
        raise CheckpointError(
            f"{checkpoint} cannot be loaded into this run (a damaged file, or another model or optimizer "
            f"settings?): {type(error).__name__}: {_first_line(error)}"
        ) from error
    if progress.best is not None and not (checkpoint / BEST_MODEL_IN_CHECKPOINT).is_dir():
        raise CheckpointError(
            f"{checkpoint} records a best model (epoch {progress.best.get('epoch')}) "
            f"but has no {BEST_MODEL_IN_CHECKPOINT}/ folder."
        )
    return progress


def _first_line(error: BaseException) -> str:
    """An exception's message on one line, cut to a readable length."""
    return " ".join(str(error).split())[:300]


def batches_to_skip(progress: TrainingProgress, batches_per_epoch: int, gradient_accumulation_steps: int) -> int:
    """How many batches of the epoch being resumed the checkpoint had already trained on."""
    steps_per_epoch = -(-batches_per_epoch // gradient_accumulation_steps)
    steps_into_epoch = progress.completed_steps - progress.epochs_done * steps_per_epoch
    return min(steps_into_epoch * gradient_accumulation_steps, batches_per_epoch)
