"""What the stages of a `train.py` run share: `Run` (settings, processes, output folder, data) and `TrainingState`.

`run.py` makes the `Run` once its folder is checked and its data loaded; the training loop
(`loop.py`) adds a `TrainingState`, and saving and resuming (`saving.py`) read both.
"""

import argparse
import dataclasses
from pathlib import Path

import datasets
import torch
from accelerate import Accelerator

from fiberbench.training.checkpointing import TrainingProgress
from fiberbench.training.hub_checkpoints import HubPusher
from fiberbench.training.inputs import video_feature_size
from fiberbench.training.launch import loader_worker_context, pushes_while_training
from fiberbench.training.models import VideoFeatures
from fiberbench.training.outputs import RunFolder

# The splits evaluated at the end, and the flag that asks for each.
EVAL_SPLITS = {"validation": "do_eval", "test": "do_predict"}


def evaluated_splits(args: argparse.Namespace) -> list[str]:
    """The splits evaluated at the end: validation with --do_eval, test with --do_predict."""
    return [name for name, flag in EVAL_SPLITS.items() if getattr(args, flag)]


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

    @property
    def pushes_each_save(self) -> bool:
        """Whether every save is pushed too (`pushes_while_training`; `HubPusher` runs on the main process only)."""
        return pushes_while_training(self.args)

    @property
    def worker_context(self):
        """How this process's data loader workers start (`loader_worker_context`); None without workers."""
        return loader_worker_context(self.args) if self.num_workers else None


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
