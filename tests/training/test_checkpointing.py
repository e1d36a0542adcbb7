"""Checkpoint state as JSON, the files a resume refuses, and which batches a resumed epoch skips."""

import json
import os
import pickle

import pytest
import torch

from fiberbench.errors import DataError
from fiberbench.training.checkpointing import (
    PROGRESS_FILE,
    CheckpointError,
    TrainingProgress,
    batches_to_skip,
    check_checkpoint_files,
    is_trusted_file,
)


class Payload:
    """A pickle that runs a shell command when loaded (what a tampered checkpoint file would hold)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_batches_to_skip_counts_the_resumed_epoch_only():
    progress = TrainingProgress(completed_steps=35, epochs_done=1)
    assert batches_to_skip(progress, batches_per_epoch=25, gradient_accumulation_steps=1) == 10
    # 13 batches and accumulation 2: 7 optimizer steps per epoch, the last one on a single batch.
    assert batches_to_skip(TrainingProgress(completed_steps=10, epochs_done=1), 13, 2) == 6
    # A checkpoint at the last step of an epoch whose evaluation had not run: skip the whole epoch.
    assert batches_to_skip(TrainingProgress(completed_steps=25, epochs_done=0), 25, 1) == 25


def test_progress_round_trips_through_json_per_process(tmp_path):
    progress = TrainingProgress(completed_steps=3, epochs_done=1, history=[{"epoch": 0}], best={"epoch": 0, "f1": 1.0})
    progress.add_loss(torch.tensor(2.0))
    progress.add_loss(torch.tensor(4.0))
    path = tmp_path / PROGRESS_FILE
    path.write_text(json.dumps(progress.to_json([6.0, 1.5], [2, 1])), encoding="utf-8")
    second_process = TrainingProgress.from_json(path, process_index=1, num_processes=2)
    assert second_process == TrainingProgress(3, 1, 1.5, 1, [{"epoch": 0}], {"epoch": 0, "f1": 1.0})
    assert TrainingProgress.from_json(path, 0, 2).take_epoch_loss() == 3.0
    with pytest.raises(CheckpointError, match="written by 2 processes; resume it with as many"):
        TrainingProgress.from_json(path, 0, 1)


@pytest.mark.parametrize(
    "record, message",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"completed_steps": -1}', "field completed_steps is missing or invalid"),
        (
            '{"completed_steps": 1, "epochs_done": 0, "history": [], "best": null, '
            '"loss_sums": ["x"], "loss_counts": [1]}',
            "field loss_sums",
        ),
        (
            '{"completed_steps": 1, "epochs_done": 0, "history": [], "best": null, '
            '"loss_sums": [NaN], "loss_counts": [0]}',
            r"field loss_sums is missing or invalid \(\[nan\]\)",
        ),
    ],
)
def test_a_bad_progress_file_names_the_file_and_field(tmp_path, record, message):
    path = tmp_path / PROGRESS_FILE
    path.write_text(record, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        TrainingProgress.from_json(path, 0, 1)


def test_a_checkpoint_without_progress_is_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint of train.py"):
        TrainingProgress.from_json(tmp_path / PROGRESS_FILE, 0, 1)


def test_a_pickle_the_script_never_writes_is_refused_unread(tmp_path):
    marker = tmp_path / "payload_ran"
    (tmp_path / "random_states_0.pkl").write_bytes(b"")
    (tmp_path / "custom_checkpoint_0.pkl").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointError, match="custom_checkpoint_0.pkl: a pickle that train.py never writes"):
        check_checkpoint_files(tmp_path, num_processes=1)
    assert not marker.exists()
    check_checkpoint_files(tmp_path / "best_model", num_processes=1)  # nothing there: accepted


@pytest.mark.parametrize("name", [".metadata", "__0_0.distcp"])
def test_a_sharded_checkpoint_is_read_only_when_trusted(tmp_path, name):
    marker = tmp_path / "payload_ran"
    shards = tmp_path / "pytorch_model_fsdp_0"
    shards.mkdir()
    (shards / name).write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointError, match=rf"{name}: a sharded .* only if you wrote it, with --trust_checkpoint"):
        check_checkpoint_files(tmp_path, num_processes=1)
    check_checkpoint_files(tmp_path, num_processes=1, trust_checkpoint=True)  # the loader's to read then


@pytest.mark.parametrize(
    "relative, trusted",
    [
        ("training_progress.json", True),
        ("model.safetensors", True),
        ("optimizer.bin", True),
        ("random_states_1.pkl", True),
        ("best_model/config.json", True),
        ("best_model/modeling_fiber_t5.py", None),
        ("README.md", None),
        ("custom_checkpoint_0.pkl", False),
        ("pytorch_model.bin", False),
        ("best_model/pytorch_model.bin", False),
        ("pytorch_model_fsdp_0/.metadata", False),
    ],
)
def test_which_checkpoint_files_a_resume_reads(relative, trusted):
    assert is_trusted_file(relative) is trusted


def test_a_sharded_file_is_trusted_only_when_told():
    assert is_trusted_file("pytorch_model_fsdp_0/__0_0.distcp", trust_checkpoint=True) is True


def test_a_damaged_or_unsafe_file_is_refused_before_anything_is_loaded(tmp_path):
    from safetensors.torch import save_file

    marker = tmp_path / "payload_ran"
    save_file({"weight": torch.zeros(64)}, tmp_path / "model.safetensors")
    torch.save({"state": {}}, tmp_path / "optimizer.bin")
    check_checkpoint_files(tmp_path, num_processes=1)
    weights = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(weights[:-10])
    with pytest.raises(CheckpointError, match="cannot be loaded into this run \\(a damaged file: model.safetensors"):
        check_checkpoint_files(tmp_path, num_processes=1)
    (tmp_path / "model.safetensors").write_bytes(weights)
    torch.save({"state": Payload(marker)}, tmp_path / "optimizer.bin")
    with pytest.raises(CheckpointError, match=r"optimizer.bin holds more than tensors and numbers \(posix.system\)"):
        check_checkpoint_files(tmp_path, num_processes=1)
    assert not marker.exists()
