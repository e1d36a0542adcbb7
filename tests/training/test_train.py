"""`accelerate launch training/train.py` end to end: the main job's outputs, fusion against text only, baselines, a
diverging loss, and a killed run resumed as if it had never stopped."""

import json
import math
import pickle
import shutil

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoModelForSeq2SeqLM, AutoProcessor

from fiberbench.cli import main as fiberbench
from fiberbench.data import load_sample
from fiberbench.metric import normalize_answer
from fiberbench.outputs import FOLDER_RECORD

from .conftest import (RESUMABLE_RUN, SPACY, Payload, assert_same_run, error_line, kill_after_save, read_outputs,
                       refusal_in_process)

pytestmark = pytest.mark.slow

SPLIT_SIZES = {"validation": 60, "test": 60}
MODEL_FILES = ("config.json", "model.safetensors", "generation_config.json", "modeling_fiber_t5.py", "tokenizer.json",
               "processor_config.json", "README.md")


def test_the_main_job_trains_on_the_synthetic_sample_and_writes_consistent_outputs(main_job):
    output_dir, result = main_job
    first = next(line for line in result.stderr.splitlines() if " INFO fiberbench.training." in line)
    assert "Main job" in first and "on the bundled SYNTHETIC sample" in first, first
    assert "it/s]" not in result.stderr, "progress bars in a log that is not a terminal"
    assert "| test " in result.stdout and "Reloaded" in result.stdout
    assert all((output_dir / "model" / name).is_file() for name in MODEL_FILES)
    results, records = read_outputs(output_dir)
    assert results["synthetic"] is True and results["fusion"] == "early" and results["num_processes"] == 1
    evaluations = [record["eval_f1"] for record in results["training"]["log_history"] if "eval_f1" in record]
    assert len(evaluations) == 12 and results["validation"]["f1"] == max(evaluations), "the best model is evaluated"
    for split, size in SPLIT_SIZES.items():
        split_records, metrics = [record for record in records if record["split"] == split], results[split]
        assert [record["index"] for record in split_records] == list(range(size)) == list(range(metrics["num_examples"]))
        for name in ("exact_match", "f1", "exact_match_label_only", "f1_label_only", "label_probability"):
            assert math.fsum(record[name] for record in split_records) / size == pytest.approx(metrics[name]), name
        for record in split_records:  # the answer among distinct candidates, as the metric normalizes them
            normalized = [normalize_answer(candidate) for candidate in record["candidates"]]
            assert record["prediction"] in record["candidates"] and len(set(normalized)) == len(normalized)
        assert set(metrics["f1_by_category"]) == {"Person", "Location", "Passive entity"}
        assert set(metrics["correct_at_k"]) >= {"1", "2", "4"} and metrics["map"] >= metrics["correct_at_k"]["1"]
    card = ModelCard.load(output_dir / "model" / "README.md")
    assert "synthetic-data" in card.data.tags and "SYNTHETIC" in card.text
    assert {result.metric_type: result.metric_value for result in card.data.eval_results}["f1"] == results["test"]["f1"]
    record = json.loads((output_dir / FOLDER_RECORD).read_text(encoding="utf-8"))
    written = sorted(str(path.relative_to(output_dir)) for path in output_dir.rglob("*") if path.is_file())
    assert record["state"] == "complete" and record["files"] == [name for name in written if name != FOLDER_RECORD]
    assert all((output_dir / name).stat().st_mode & 0o777 == 0o644 for name in ("results.json", "predictions.jsonl"))


def test_fiberbench_evaluate_reads_the_predictions_as_they_are(main_job, tmp_path):
    results, _ = read_outputs(main_job[0])
    arguments = [main_job[0] / "predictions.jsonl", "--split", "test", "--output_dir", tmp_path / "scores"]
    assert fiberbench(["evaluate", *map(str, arguments)]) == 0
    scores = json.loads((tmp_path / "scores" / "results.json").read_text())["systems"]["predictions"]
    assert scores["exact_match"] == pytest.approx(results["test"]["exact_match"])
    assert scores["f1"] == pytest.approx(results["test"]["f1"])


def test_the_saved_model_answers_as_the_run_scored_it(main_job, nlp):
    test = load_sample("i3d")["test"]
    model = AutoModelForSeq2SeqLM.from_pretrained(main_job[0] / "model")
    processor = AutoProcessor.from_pretrained(main_job[0] / "model")
    answers = model.fill_blanks(processor, test["masked_caption"], video_features=test.with_format("numpy")[
        "video_features"], nlp=nlp)
    assert answers == [record["prediction"] for record in read_outputs(main_job[0])[1] if record["split"] == "test"]


def test_early_fusion_beats_text_only_by_15_f1(main_job, text_only_job):
    early, text_only = read_outputs(main_job[0])[0], read_outputs(text_only_job)[0]
    assert early["fusion"] == "early" and text_only["fusion"] == "none"
    assert early["test"]["f1"] - text_only["test"]["f1"] >= 15, (early["test"]["f1"], text_only["test"]["f1"])


@pytest.mark.parametrize("baseline", [["--baseline", "most_frequent_answer"], ["--do_train", "false", "--fusion", "none"]],
                         ids=["most frequent answer", "zero-shot"])
def test_baselines_write_the_same_outputs_without_a_model(train_here, built_sample, tmp_path, baseline):
    result = train_here([*baseline, *SPACY, "--dataset_name", built_sample, "--output_dir", tmp_path])
    assert f"on {built_sample} (SYNTHETIC: built from the bundled sample)" in result.stderr
    results, records = read_outputs(tmp_path)
    assert results["synthetic"] is True and "training" not in results and not (tmp_path / "model").exists()
    assert len(records) == sum(SPLIT_SIZES.values()) and set(results) >= set(SPLIT_SIZES)
    if "--baseline" in baseline:
        assert {record["prediction"] for record in records} == {results["answer"]}


def test_a_loss_that_becomes_nan_stops_the_run_in_one_line(train_here, tmp_path):
    result = train_here(["--learning_rate", 1e30, "--max_steps", 10, "--do_eval", "false", "--output_dir",
                         tmp_path / "run"], check=False)
    assert "The training loss became nan" in error_line(result)
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_run_killed_after_a_save_resumes_as_if_it_had_never_stopped(train_here, uninterrupted_resumable_run,
                                                                       tmp_path):
    killed = tmp_path / "killed"
    kill_after_save(RESUMABLE_RUN, killed, "checkpoint-30")
    train_here([*RESUMABLE_RUN, "--output_dir", killed, "--resume_from_checkpoint", killed / "checkpoint-30"])
    assert_same_run(uninterrupted_resumable_run, killed)
    record = json.loads((killed / FOLDER_RECORD).read_text(encoding="utf-8"))
    assert record["state"] == "complete" and "checkpoint-45/trainer_state.json" in record["files"]


@pytest.mark.parametrize("file, write, arguments, message", [
    ("optimizer.pt", lambda path, payload: torch.save({"state": payload}, path), [], "would create posix.system"),
    ("rng_state.pth", lambda path, payload: torch.save({"cpu": payload}, path), [], "would create posix.system"),
    ("extra.pkl", lambda path, payload: path.write_bytes(pickle.dumps(payload)), [], "what torch cannot check"),
    (None, None, ["--learning_rate", 0.01, "--seed", 7], "learning_rate: 0.01 here, 0.003 there; seed: 7 here, 42 there"),
], ids=["optimizer with code", "RNG state with code", "another pickle", "other settings"])
def test_a_checkpoint_that_would_run_code_or_train_otherwise_is_refused_before_anything_loads(
    uninterrupted_resumable_run, tmp_path, monkeypatch, capfd, file, write, arguments, message
):
    checkpoint = tmp_path / "copy" / "checkpoint-45"
    shutil.copytree(uninterrupted_resumable_run / "checkpoint-45", checkpoint)
    marker = tmp_path / "payload_ran"
    if file:
        write(checkpoint / file, Payload(marker))
    line = refusal_in_process([*RESUMABLE_RUN, *arguments, "--resume_from_checkpoint", checkpoint, "--output_dir",
                               tmp_path / "resumed"], monkeypatch, capfd)
    assert message in line and str(checkpoint) in line, line
    assert not marker.exists() and not (tmp_path / "resumed").exists()
