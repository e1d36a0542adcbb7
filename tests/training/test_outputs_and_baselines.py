"""The results table, the most-frequent-answer baseline and checkpoint arithmetic."""

import pytest
import torch

from fiberbench.metric.baselines import most_frequent_answer
from fiberbench.training.checkpointing import TrainingProgress, batches_to_skip
from fiberbench.training.outputs import format_results_table


def test_results_table_has_a_row_per_split():
    metrics = {
        "num_examples": 2,
        "exact_match": 50.0,
        "f1": 62.5,
        "correct_at_k": {"1": 50.0},
        "map": 75.0,
        "label_probability": None,
    }
    table = format_results_table("title", {"validation": metrics, "test": metrics})
    lines = table.splitlines()
    assert lines[0] == "title" and len(lines) == 5
    cells = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert cells == ["validation", "2", "50.0", "62.5", "-", "-", "50.0", "75.0", "-"]  # "-": not given


def test_most_frequent_answer_counts_normalized_labels():
    labels = ["A man", "a woman", "the man", "a man.", "a woman", "Woman"]
    assert most_frequent_answer(labels) in {"A man", "the man", "a man."}
    assert most_frequent_answer(["a dog", "a cat", "a dog", "A cat"]) == "a dog"  # tie: first form seen
    assert most_frequent_answer(["the Man", "a man", "a man"]) == "a man"  # its most common spelling
    with pytest.raises(ValueError, match="non-empty"):
        most_frequent_answer([])


def test_batches_to_skip_counts_the_resumed_epoch_only():
    progress = TrainingProgress(completed_steps=35, epochs_done=1)
    assert batches_to_skip(progress, batches_per_epoch=25, gradient_accumulation_steps=1) == 10
    # 13 batches and accumulation 2: 7 optimizer steps per epoch, the last one on a single batch.
    assert batches_to_skip(TrainingProgress(completed_steps=10, epochs_done=1), 13, 2) == 6
    # A checkpoint at the last step of an epoch whose evaluation had not run: skip the whole epoch.
    assert batches_to_skip(TrainingProgress(completed_steps=25, epochs_done=0), 25, 1) == 25


def test_progress_round_trips_through_its_state_dict():
    progress = TrainingProgress(completed_steps=3, epochs_done=1, history=[{"epoch": 0}], best={"epoch": 0, "f1": 1.0})
    progress.add_loss(torch.tensor(2.0))
    progress.add_loss(torch.tensor(4.0))
    state = progress.state_dict()
    assert state["loss_sum"] == 6.0 and isinstance(state["loss_sum"], float)
    restored = TrainingProgress()
    restored.load_state_dict(state)
    assert restored == TrainingProgress(3, 1, 6.0, 2, [{"epoch": 0}], {"epoch": 0, "f1": 1.0})
    assert restored.take_epoch_loss() == 3.0 and (restored.loss_sum, restored.loss_count) == (0.0, 0)
