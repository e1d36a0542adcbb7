"""Long runs of `predict`: killed and resumed, two processes, videos found later, two runs, inputs changed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from fiberbench.cli import main
from fiberbench.records import clip_id, clips_fingerprint
from fiberbench.testing.tiny_models import save_seq2seq

from ..processes import run_to_end
from .conftest import KEYS, SPACY, metadata, predict, read_evaluate_format, videos_but_one

pytestmark = pytest.mark.slow

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
# `accelerate launch --cpu --num_processes 2` runs one process; this two, with ACCELERATE_USE_CPU=1 (port 0: a free one).
TWO_CPU_PROCESSES = ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
                     "--dynamo_backend", "no", "--main_process_port", "0"]


def command(model, output_file, *flags) -> list[str]:
    return ["predict", "--model_name_or_path", str(model), "--output_file", str(output_file), *SPACY, *map(str, flags)]


def run_in_a_process(argv: list[str], **popen) -> subprocess.Popen:
    """`fiberbench ARGV` in a new process, offline."""
    return subprocess.Popen([sys.executable, "-m", "fiberbench.cli", *argv], env={**os.environ, **OFFLINE}, text=True,
                            **popen)


def run_in_two_cpu_processes(argv: list[str], timeout: float) -> tuple[int, str]:
    """`fiberbench ARGV` under `accelerate launch` as two processes on the CPU, offline, to its end (stopped whole
    after `timeout` seconds): its exit status and stderr."""
    command = [sys.executable, "-m", "accelerate.commands.launch", *TWO_CPU_PROCESSES, "-m", "fiberbench.cli", *argv]
    result = run_to_end(command, timeout=timeout, capture_output=True, text=True,
                        env={**os.environ, **OFFLINE, "ACCELERATE_USE_CPU": "1"})
    return result.returncode, result.stderr


def lines(path) -> int:  # rows written
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_killed_run_resumed_writes_the_uninterrupted_file(tiny_models, tmp_path, caplog):
    caplog.set_level("INFO")
    flags = ["--per_device_eval_batch_size", 1, "--dataloader_num_workers", 0]
    uninterrupted, resumed = tmp_path / "uninterrupted.jsonl", tmp_path / "resumed" / "predictions.jsonl"
    assert predict(tiny_models["seq2seq"], uninterrupted, *flags, *SPACY) == 0
    process = run_in_a_process(command(tiny_models["seq2seq"], resumed, *flags), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while lines(resumed) < 4 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    done = lines(resumed)
    assert 4 <= done < 60 and metadata(resumed)["state"] == "running", "the run was not killed in the middle"
    with resumed.open("a") as file:
        file.write('{"video_id": "half a li')  # as a kill in the middle of a line leaves it

    caplog.clear()
    assert predict(tiny_models["seq2seq"], resumed, *flags, *SPACY) == 0
    assert f"{done} of 60 clips of the bundled sample, split test already predicted, {60 - done} to go" in caplog.text
    assert resumed.read_bytes() == uninterrupted.read_bytes()
    assert metadata(resumed) == metadata(uninterrupted)  # complete, with the same settings
    assert sorted(path.name for path in resumed.parent.iterdir()) == [
        ".predictions.jsonl.lock", "predictions.jsonl", "predictions.metadata.json"]  # no temporary file


def test_two_processes_write_the_file_of_one(tiny_models, tmp_path):
    kind = "causal"  # the kind whose steps do the most (a chat template, replies read); the writer is every kind's
    one, two = tmp_path / "one" / "predictions.jsonl", tmp_path / "two" / "predictions.jsonl"
    flags = ["--per_device_eval_batch_size", 4, "--max_predict_samples", 22]
    assert predict(tiny_models[kind], one, *flags, *SPACY) == 0
    status, stderr = run_in_two_cpu_processes(command(tiny_models[kind], two, *flags), timeout=300)
    assert status == 0, stderr[-4000:]
    assert "Process 1 of 2: 12 clips to predict" in stderr and "Process 2 of 2: 10 clips to predict" in stderr
    assert two.read_bytes() == one.read_bytes() and metadata(two)["settings"] == metadata(one)["settings"]
    assert sorted(path.name for path in two.parent.iterdir()) == [
        ".predictions.jsonl.lock", "predictions.jsonl", "predictions.metadata.json"]


def test_a_bad_video_stops_both_processes_before_any_work_said_once(tiny_models, video_dir, tmp_path):
    videos = videos_but_one(video_dir, tmp_path, index=-1)
    (good,) = video_dir.glob(f"{KEYS[-1][0]}*.mp4")
    (videos / good.name).write_text("not a video")
    output_file = tmp_path / "out" / "predictions.jsonl"
    flags = ["--video_dir", videos, "--num_frames", 2]
    status, stderr = run_in_two_cpu_processes(command(tiny_models["video"], output_file, *flags), timeout=300)
    errors = [line for line in stderr.splitlines() if line.startswith("fiberbench predict: error:")]
    assert status != 0 and errors == [
        f"fiberbench predict: error: {videos / good.name}: cannot be decoded (Invalid data found when processing "
        "input) "
        f"(the video of clip {KEYS[-1][0]}, {KEYS[-1][1]}-{KEYS[-1][2]} s); 1 of 60 clips' videos cannot be used"
    ], stderr[-4000:]
    assert not output_file.parent.exists(), "something was written"


CLIPS = [clip_id(*key) for key in KEYS]
ALL_ANSWERED = {"rows": 60, "answered": 60, "missing_clips": [], "clips_fingerprint": clips_fingerprint(CLIPS)}


def test_a_skipped_clip_is_missing_then_predicted_once_its_video_is_there(tiny_models, video_dir, tmp_path, caplog):
    """Marked missing, never an empty answer without a word; the clips answered are those `fiberbench clips` finds."""
    caplog.set_level("INFO")
    videos = videos_but_one(video_dir, tmp_path, index=0)
    output_file = tmp_path / "predictions.jsonl"
    flags = ["--video_dir", videos, "--num_frames", 2, "--skip_missing_videos", *SPACY]
    assert predict(tiny_models["video"], output_file, *flags) == 0
    rows = read_evaluate_format(output_file, num_beams=1, replies=True)
    assert rows[0] == dict(zip(("video_id", "video_start_time", "video_end_time"), KEYS[0])) | {
        "prediction": "", "raw": [], "missing": True}
    assert all(row["raw"] and "missing" not in row for row in rows[1:])
    missing = {"rows": 60, "answered": 59, "missing_clips": CLIPS[:1],
               "clips_fingerprint": clips_fingerprint(CLIPS[1:])}
    assert metadata(output_file)["output"] == missing
    assert "1 of 60 clips have no video" in caplog.text and "1 clips missing (no video), marked so" in caplog.text
    assert main(["clips", str(videos), "--output_file", str(tmp_path / "clips.json")]) == 0
    manifest = json.loads((tmp_path / "clips.json").read_text())
    assert manifest["clips_fingerprint"] == missing["clips_fingerprint"] and manifest["missing"] == CLIPS[:1]
    skipped = shutil.copy(output_file, tmp_path / "skipped.jsonl")
    shutil.copy(output_file.with_suffix("").with_suffix(".metadata.json"), tmp_path / "skipped.metadata.json")

    for video in video_dir.glob(f"{KEYS[0][0]}*"):
        (videos / video.name).symlink_to(video)
    caplog.clear()
    assert predict(tiny_models["video"], output_file, *flags) == 0
    assert "59 of 60 clips of the bundled sample, split test already predicted, 1 to go" in caplog.text
    rows_after = read_evaluate_format(output_file, num_beams=1, replies=True)
    assert rows_after[0]["raw"] and rows_after[1:] == rows[1:]
    assert metadata(output_file)["output"] == ALL_ANSWERED
    assert main(["predict", "--reread", str(skipped), "--output_file", str(tmp_path / "reread.jsonl"),
                 "--no_read_noun_phrases"]) == 0  # a missing clip stays missing
    assert metadata(tmp_path / "reread.jsonl")["output"] == missing
    assert json.loads((tmp_path / "reread.jsonl").read_text().splitlines()[0])["missing"] is True


def test_a_second_run_into_an_output_being_written_is_refused(tiny_models, tmp_path, cli_error):
    output_file = tmp_path / "predictions.jsonl"
    first = run_in_a_process(command(tiny_models["seq2seq"], output_file, "--per_device_eval_batch_size", 1),
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while lines(output_file) < 1 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    first.send_signal(signal.SIGSTOP)  # held still mid-run: on a fast machine it would be done before the second starts
    try:
        status, error = cli_error(*command(tiny_models["causal"], output_file))
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert status == 2 and f"is being written by another run (fiberbench predict, PID {first.pid} on" in error, error
    assert metadata(output_file)["settings"]["model"]["name_or_path"] == str(tiny_models["seq2seq"])
    assert lines(output_file) == 60


@pytest.mark.parametrize("change", ["the model re-saved with other weights", "the dataset rebuilt with other captions"])
def test_a_rerun_after_its_inputs_changed_is_refused(change, tiny_models, built_sample, tmp_path, cli_error):
    """A resume after the model or the dataset changed at the same path would mix the old rows and the new."""
    model, dataset, output_file = tmp_path / "model", tmp_path / "fiber", tmp_path / "predictions.jsonl"
    shutil.copytree(tiny_models["seq2seq"], model)
    shutil.copytree(built_sample, dataset)
    argv = ["--dataset_name", dataset, "--max_predict_samples", 4]
    assert predict(model, output_file, *argv) == 0
    before = output_file.read_bytes()
    if change.startswith("the model"):
        shutil.rmtree(model)
        save_seq2seq(model, d_model=48)
        changed = "model.files.model.safetensors"
    else:
        shard = next((dataset / "text").glob("test-*.parquet"))
        table = pq.read_table(shard)
        captions = [f"Another {caption}" for caption in table.column("masked_caption").to_pylist()]
        index = table.column_names.index("masked_caption")
        pq.write_table(table.set_column(index, "masked_caption", [captions]), shard)
        changed = "dataset.fingerprint"
    status, line = cli_error("predict", "--model_name_or_path", model, "--output_file", output_file, *argv)
    assert status == 2 and "holds predictions made with other settings" in line and changed in line, line
    assert output_file.read_bytes() == before
