"""`accelerate launch --multi_gpu --num_processes 2` on CPUs: two processes really train and evaluate together."""

import json

import pytest

from ..readme_walks import DOCS, block_run
from .conftest import SPACY, TWO_PROCESSES, error_line, read_outputs

pytestmark = pytest.mark.slow


def test_two_processes_train_as_one_group(two_processes_pushed_run):
    output_dir, result, _ = two_processes_pushed_run
    assert "Process 0 of 2" in result.stderr and "Process 1 of 2" in result.stderr
    results = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    assert results["num_processes"] == 2 and results["training"]["global_step"] == 8
    # Batch 16 in each of 2 processes: 13 steps to an epoch of the 400 training blanks (25 in one process).
    assert results["training"]["log_history"][-1]["epoch"] == pytest.approx(8 / 13)


def test_two_processes_evaluate_like_one(train_here, tmp_path_factory, tmp_path):
    """docs/training.md's run in two processes scored its model as one process scores it, and only its main process
    wrote and printed the results."""
    repository, run = block_run(tmp_path_factory, DOCS / "training.md", "outputs/sample_demo_2_processes")
    two_processes = repository / "outputs/sample_demo_2_processes"
    settings = ["--model_name_or_path", two_processes / "model", "--do_train", "false", *SPACY]
    train_here([*settings, "--output_dir", tmp_path / "one"])
    assert run.stdout.count("FIBER results") == 1, "only the main process writes and prints"
    (two, two_records), (one, one_records) = read_outputs(two_processes), read_outputs(tmp_path / "one")
    assert two["num_processes"] == 2 and one["num_processes"] == 1
    for split in ("validation", "test"):
        assert {key: two[split][key] for key in ("exact_match", "f1", "correct_at_k", "map")} == {
            key: one[split][key] for key in ("exact_match", "f1", "correct_at_k", "map")}
    keep = ("split", "index", "prediction", "candidates")
    assert [[record[key] for key in keep] for record in two_records] == [
        [record[key] for key in keep] for record in one_records]


def test_a_refusal_is_said_once_by_the_main_process(launch, tmp_path):
    result = launch(["--learning_rate", "-1", "--output_dir", tmp_path / "run"], launch_args=TWO_PROCESSES, check=False)
    assert "--learning_rate: must be a finite number greater than 0" in error_line(result)
