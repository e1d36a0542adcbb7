"""FIBER's lmms-eval task: its functions (fiberbench's prompt, answer and metric), and the real lmms-eval CLI on a tiny
Qwen2-VL, offline, whose results equal `fiberbench evaluate` on its logged samples.

lmms-eval exits 0 when a run fails, so the CLI tests read its results file (or its absence) and log.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.errors import DataError, UsageError
from fiberbench.lmms_eval_tasks import TASK_PATH
from fiberbench.metric import exact_match, f1, references_from_example
from fiberbench.predict.prompts import DEFAULT_PROMPT
from fiberbench.predict.replies import read_answer, reader_settings
from fiberbench.testing.tiny_videos import sample_test_records, write_sample_videos, write_video
from fiberbench.testing.video_families import save_video_family

from fiberbench.lmms_eval_tasks.fiber import utils  # isort: skip - the file lmms-eval imports by its path

FIRST = sample_test_records()[0]
CLIP_FILE = "{video_id}_{video_start_time:06d}_{video_end_time:06d}.mp4".format(**FIRST)
METRICS = ("exact_match", "f1", "exact_match_label_only", "f1_label_only")


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """A file of each test clip alone (lmms-eval's models read whole files)."""
    folder = tmp_path_factory.mktemp("videos")
    write_sample_videos(folder, whole_videos=False)
    return folder


def test_fiberbench_prints_the_task_folder(capsys):
    assert main(["lmms-eval-task"]) == 0
    assert capsys.readouterr().out == f"{TASK_PATH}\n"
    assert sorted(path.name for path in TASK_PATH.iterdir() if path.suffix != "") == [
        "fiber_test.yaml",
        "fiber_val.yaml",
        "utils.py",
    ]


def test_the_prompt_is_fiberbench_predicts():
    assert utils.doc_to_text(FIRST, {"prompt": None}) == DEFAULT_PROMPT.format(masked_caption=FIRST["masked_caption"])
    assert utils.doc_to_text(FIRST, {"prompt": "Fill: {masked_caption}"}) == f"Fill: {FIRST['masked_caption']}"
    with pytest.raises(ValueError, match="the task's prompt 'Fill the blank.': must contain {masked_caption}"):
        utils.doc_to_text(FIRST, {"prompt": "Fill the blank."})
    assert utils.doc_to_target(FIRST) == FIRST["label"]


@pytest.mark.parametrize(
    "reply",
    ['"A pizza."\nIt is round.', "The missing noun phrase is a pizza.", "A pizza appears on the screen.", "food", ""],
    ids=["quoted", "statement", "filled caption", "other", "empty"],
)
def test_results_are_the_metrics_scores_of_the_answer_read_as_predict_reads_it(reply):
    answer = read_answer(reply, FIRST["masked_caption"], utils.reader_pipeline())
    scored = utils.process_results(FIRST, [reply])
    everyone, label = references_from_example(FIRST), references_from_example(FIRST, label_only=True)
    assert scored == {
        "exact_match": exact_match(answer, everyone),
        "f1": f1(answer, everyone),
        "exact_match_label_only": exact_match(answer, label),
        "f1_label_only": f1(answer, label),
        "video_id": FIRST["video_id"],
        "video_start_time": FIRST["video_start_time"],
        "video_end_time": FIRST["video_end_time"],
        "prediction": answer,
        "reader": reader_settings(utils.reader_pipeline()),
    }
    if "pizza" in reply:
        assert scored["exact_match"] == scored["exact_match_label_only"] == 100.0


def test_every_clip_has_its_video_before_any_generation(videos, monkeypatch):
    from datasets import Dataset

    split = Dataset.from_list(sample_test_records())
    monkeypatch.setenv("FIBER_VIDEO_DIR", str(videos))
    assert utils.process_docs(split) is split
    assert utils.doc_to_visual(FIRST) == [str(videos / CLIP_FILE)]


def folder_without_the_first_clip(videos, folder):
    shutil.copytree(videos, folder)
    (folder / CLIP_FILE).unlink()
    return folder


def folder_with_a_whole_video(videos, folder):
    """The first clip's whole video instead of its clip file."""
    write_video(folder_without_the_first_clip(videos, folder) / f"{FIRST['video_id']}.mp4", seconds=140, fps=1)
    return folder


def folder_with_a_webm(videos, folder):
    """The first clip's file named .webm (lmms-eval's chat tasks would send it as audio)."""
    shutil.copy(videos / CLIP_FILE, folder_without_the_first_clip(videos, folder) / f"{CLIP_FILE[:-4]}.webm")
    return folder


def folder_with_a_broken_video(videos, folder):
    (folder_without_the_first_clip(videos, folder) / CLIP_FILE).write_text("not a video")
    return folder


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda videos, folder: None, UsageError, "the folder named by FIBER_VIDEO_DIR: set it$"),
        (lambda videos, folder: folder / "absent", DataError, "FIBER_VIDEO_DIR=.*absent: no such folder$"),
        (
            folder_without_the_first_clip,
            DataError,
            f"no video for clip {FIRST['video_id']} \\(123-133 s\\): looked for {CLIP_FILE[:-4]}.mp4 or "
            f"{FIRST['video_id']}.mp4 \\(or .mkv, .webm\\); 1 of 60 clips have no usable video$",
        ),
        (
            folder_with_a_whole_video,
            DataError,
            f"{FIRST['video_id']}.mp4: the whole video of clip {FIRST['video_id']} \\(123-133 s\\), but lmms-eval's "
            f"models read whole files: the clip needs a file of its own, {CLIP_FILE}; 1 of 60",
        ),
        (
            folder_with_a_broken_video,
            DataError,
            f"{CLIP_FILE}: cannot be decoded .*; 1 of 60 clips have no usable video$",
        ),
        (
            folder_with_a_webm,
            DataError,
            f"{CLIP_FILE[:-4]}.webm: lmms-eval's models read clips from .mp4 files; convert it to {CLIP_FILE}; 1 of 60",
        ),
    ],
    ids=["no FIBER_VIDEO_DIR", "no such folder", "a clip without a video", "a whole video", "not a video", "webm"],
)
def test_a_clip_without_a_usable_video_is_one_line(videos, tmp_path, monkeypatch, make, error, message):
    from datasets import Dataset

    folder = make(videos, tmp_path / "videos")
    if folder is None:
        monkeypatch.delenv("FIBER_VIDEO_DIR", raising=False)
    else:
        monkeypatch.setenv("FIBER_VIDEO_DIR", str(folder))
    with pytest.raises(error, match=message) as raised:
        utils.process_docs(Dataset.from_list(sample_test_records()))
    assert "\n" not in str(raised.value)


def split_with(field: str, value, rows: list[int]):
    """The bundled sample's test split with `value` (of each row, given its own) in `field` of `rows`, as a dataset made
    by other means may hold (a column of one type: an Arrow table)."""
    from datasets import Dataset

    records = sample_test_records()
    for row in rows:
        records[row] = records[row] | {field: value(records[row][field])}
    return Dataset.from_list(records, split="test")


@pytest.mark.parametrize(
    "field, value, rows, message",
    [
        ("video_id", lambda _: "../outside/evil", [1], "field 'video_id': '../outside/evil' is not a plain video id"),
        ("masked_caption", lambda _: None, [1], "field 'masked_caption': expected str, got NoneType"),
        ("masked_caption", lambda _: "No blank.", [1], "field 'masked_caption': expected exactly one blank"),
        ("video_start_time", str, range(60), "field 'video_start_time': must be a whole number of seconds"),
    ],
    ids=["a video id out of the folder", "no caption", "a caption without a blank", "times as text"],
)
def test_every_doc_is_checked_before_any_generation(videos, monkeypatch, field, value, rows, message):
    """The builder's record check, as predict's dataset checks: before any video is looked for, one line naming the
    doc and the field (a bad caption failed after all generation, a time as text as "Unknown format code 'd'")."""
    monkeypatch.setenv("FIBER_VIDEO_DIR", str(videos))
    with pytest.raises(DataError) as raised:
        utils.process_docs(split_with(field, value, list(rows)))
    line = str(raised.value)
    assert line.startswith(f"the FIBER task's test split: record {min(rows)}: ") and message in line, line
    assert line.endswith(f"; {len(rows)} of 60 docs are not FIBER records") and "\n" not in line


@pytest.mark.parametrize("asked, steps", [("1", ["noun_phrase"]), ("0", [])])
def test_the_reading_is_logged_with_every_sample(asked, steps, monkeypatch):
    monkeypatch.setenv("FIBER_READ_NOUN_PHRASES", asked)
    utils.reader_pipeline.cache_clear()
    try:
        reader = utils.process_results(FIRST, ["a pizza"])["reader"]
    finally:
        utils.reader_pipeline.cache_clear()
    assert reader == reader_settings(None if asked == "0" else utils.reader_pipeline())
    assert reader["noun_phrase_step"] is bool(steps) and reader["readings"][6:] == steps


def test_without_its_spacy_pipeline_the_task_refuses_before_any_generation(videos, monkeypatch):
    """Never a silent reading without the noun-phrase step (other answers): FIBER_READ_NOUN_PHRASES=0 asks for it."""
    from datasets import Dataset

    monkeypatch.setenv("FIBER_VIDEO_DIR", str(videos))
    monkeypatch.setenv("FIBERBENCH_SPACY_MODEL", "en_core_web_absent")
    utils.reader_pipeline.cache_clear()
    try:
        with pytest.raises(UsageError, match=r"noun-phrase step cannot run: .* set FIBER_READ_NOUN_PHRASES=0$"):
            utils.process_docs(Dataset.from_list(sample_test_records()))
        monkeypatch.setenv("FIBER_READ_NOUN_PHRASES", "no")
        with pytest.raises(UsageError, match="^FIBER_READ_NOUN_PHRASES=no: 1 .* 0 without it$"):
            utils.reader_pipeline()
    finally:
        utils.reader_pipeline.cache_clear()


def lmms_eval(cwd: Path, video_dir: Path, model: Path, output_path: Path, *flags, backend: str = "qwen2_vl"):
    """The lmms-eval CLI on FIBER's test split with a tiny model on the CPU (`backend`: a Qwen2-VL one), offline."""
    environment = {
        **os.environ,
        "FIBER_VIDEO_DIR": str(video_dir),
        # The datasets cache keys a local folder by its name: a fresh one, so that no other `fiber` is read.
        "HF_HOME": str(cwd / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = [
        *(sys.executable, "-m", "lmms_eval", "eval", "--model", backend, "--device", "cpu"),
        *("--model_args", f"pretrained={model},device_map=cpu,max_num_frames=4"),
        *("--include_path", str(TASK_PATH), "--tasks", "fiber_test", "--batch_size", "1"),
        *("--log_samples", "--output_path", str(output_path), *flags),
    ]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def lmms_eval_run(tmp_path_factory, videos):
    """A folder with the bundled sample built as `fiber` and a tiny Qwen2-VL; the lmms-eval run's results file."""
    folder = tmp_path_factory.mktemp("lmms_eval")
    assert main(["build-dataset", "--output_dir", str(folder / "fiber")]) == 0
    save_video_family("qwen2_vl", folder / "qwen2_vl")
    result = lmms_eval(folder, videos, folder / "qwen2_vl", folder / "results")
    results = list((folder / "results").rglob("*_results.json"))
    assert result.returncode == 0 and len(results) == 1, result.stderr[-4000:]
    return folder, results[0]


@pytest.mark.video
@pytest.mark.slow
def test_lmms_eval_scores_equal_fiberbench_evaluate_on_its_samples(lmms_eval_run):
    folder, results_file = lmms_eval_run
    scores = json.loads(results_file.read_text())["results"]["fiber_test"]
    [samples] = results_file.parent.glob("*_samples_fiber_test.jsonl")
    logged = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(logged) == 60
    nlp = utils.reader_pipeline()
    captions = [record["masked_caption"] for record in sample_test_records()]
    assert [sample["prediction"] for sample in logged] == [
        read_answer(sample["filtered_resps"], captions[sample["doc_id"]], nlp) for sample in logged
    ]
    assert all(sample["reader"] == reader_settings(nlp) for sample in logged)

    output_dir = folder / "evaluation"
    flags = ["--dataset_name", str(folder / "fiber"), "--output_dir", str(output_dir), "--num_bootstrap", "100"]
    assert main(["evaluate", str(samples), *flags, "--names", "tiny Qwen2-VL (lmms-eval)"]) == 0
    evaluated = json.loads((output_dir / "results.json").read_text())["systems"]["tiny Qwen2-VL (lmms-eval)"]
    assert evaluated["reading"] == reader_settings(nlp)
    for metric in METRICS:
        assert scores[f"{metric},none"] == pytest.approx(evaluated[metric], abs=1e-9), metric
    assert any(sample["f1"] > 0 for sample in logged)  # random words still share a token with some answers


@pytest.mark.video
@pytest.mark.slow
def test_lmms_eval_with_a_missing_video_names_the_clip(lmms_eval_run, videos, tmp_path):
    folder, _ = lmms_eval_run
    missing_one = folder_without_the_first_clip(videos, tmp_path / "videos")
    result = lmms_eval(folder, missing_one, folder / "qwen2_vl", tmp_path / "results")
    assert result.returncode == 0  # lmms-eval's own choice, hence the results file is read
    assert not list((tmp_path / "results").rglob("*_results.json"))
    assert f"no video for clip {FIRST['video_id']} (123-133 s): looked for {CLIP_FILE}" in result.stderr


@pytest.mark.video
@pytest.mark.slow
def test_a_chat_backend_runs_the_same_task(lmms_eval_run, videos, tmp_path):
    """lmms-eval's `qwen2_5_vl` backend is a chat model (the task's visual and text become messages), as vLLM's is."""
    folder, _ = lmms_eval_run
    save_video_family("qwen2_5_vl", tmp_path / "qwen2_5_vl")
    output_path = tmp_path / "results"
    result = lmms_eval(folder, videos, tmp_path / "qwen2_5_vl", output_path, "--limit", "4", backend="qwen2_5_vl")
    [results] = output_path.rglob("*_results.json")
    written = json.loads(results.read_text())
    assert written["config"]["model_backend"].endswith("(chat)") and "fiber_test" in written["results"]
    [samples] = output_path.rglob("*_samples_fiber_test.jsonl")
    logged = [json.loads(line) for line in samples.read_text().splitlines()]
    keys = [(sample["video_id"], sample["video_start_time"], sample["video_end_time"]) for sample in logged]
    assert keys == [tuple(record[field] for field in utils.KEY_FIELDS) for record in sample_test_records()[:4]]
    assert result.returncode == 0
