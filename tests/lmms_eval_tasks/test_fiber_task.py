"""FIBER's lmms-eval task: its functions (`fiberbench predict`'s prompt and reader, the metric's scores), and the real
lmms-eval CLI on tiny Qwen2-VL and Qwen2.5-VL models, offline, whose scores equal `fiberbench evaluate` on its logged
samples; its blind control and clips without a video. lmms-eval exits 0 when a run fails, so the CLI tests read its
results file (or its absence) and its log."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from datasets import Dataset

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR
from fiberbench.errors import DataError, UsageError
from fiberbench.lmms_eval_tasks import TASK_PATH
from fiberbench.metric import (annotators_from_example, exact_match, f1, f1_release, references_from_example,
                               vqa_accuracy)
from fiberbench.predict.prompts import DEFAULT_PROMPT
from fiberbench.predict.replies import read_answer, reader_settings
from fiberbench.testing.tiny_videos import read_records, write_video, write_videos
from fiberbench.testing.video_families import save_video_family

from fiberbench.lmms_eval_tasks.fiber import utils  # isort: skip - the file lmms-eval imports by its path

RECORDS = read_records(SAMPLE_DIR, "test")
FIRST = RECORDS[0]
CLIP_FILE = "{video_id}_{video_start_time:06d}_{video_end_time:06d}.mp4".format(**FIRST)
KEY = {field: FIRST[field] for field in utils.KEY_FIELDS}


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """A file of each test clip alone (lmms-eval's models read whole files)."""
    write_videos(folder := tmp_path_factory.mktemp("videos"), RECORDS)
    return folder


@pytest.fixture
def reader_env(monkeypatch):
    """`monkeypatch`, the task's cached reader pipeline cleared before and after (it reads the environment)."""
    utils.reader_pipeline.cache_clear()
    yield monkeypatch
    utils.reader_pipeline.cache_clear()


def test_the_task_folder_prompt_and_target(capsys):
    assert main(["lmms-eval-task"]) == 0 and capsys.readouterr().out == f"{TASK_PATH}\n"
    assert sorted(path.name for path in TASK_PATH.iterdir() if path.suffix) == [
        "fiber_test.yaml", "fiber_test_blind.yaml", "fiber_val.yaml", "fiber_val_blind.yaml", "utils.py"]
    assert utils.doc_to_visual_blind(FIRST) == []
    assert utils.doc_to_text(FIRST, {"prompt": None}) == DEFAULT_PROMPT.format(masked_caption=FIRST["masked_caption"])
    assert utils.doc_to_text(FIRST, {"prompt": "Fill: {masked_caption}"}) == f"Fill: {FIRST['masked_caption']}"
    with pytest.raises(ValueError, match="the task's prompt 'Fill the blank.': must contain {masked_caption}"):
        utils.doc_to_text(FIRST, {"prompt": "Fill the blank."})
    assert utils.doc_to_target(FIRST) == FIRST["label"]


@pytest.mark.parametrize("reply", ['"A pizza."\nIt is round.', "The missing noun phrase is a pizza.", "food", ""])
def test_results_are_the_metrics_scores_of_the_answer_read_as_predict_reads_it(reply, videos, reader_env):
    reader_env.setenv("FIBER_VIDEO_DIR", str(videos))
    nlp = utils.reader_pipeline()
    answer = read_answer(reply, FIRST["masked_caption"], nlp)
    everyone, label = references_from_example(FIRST), references_from_example(FIRST, label_only=True)
    assert utils.process_results(FIRST, [reply]) == {
        "exact_match": exact_match(answer, everyone), "f1": f1(answer, everyone),
        "exact_match_label_only": exact_match(answer, label), "f1_label_only": f1(answer, label),
        "vqa_accuracy": vqa_accuracy(answer, annotators_from_example(FIRST)),
        "f1_release": f1_release(answer, everyone), "answered": 100.0, **KEY, "reader": reader_settings(nlp),
        "video_input": "video", "prediction": answer}
    assert "pizza" not in reply or utils.process_results(FIRST, [reply])["exact_match_label_only"] == 100.0
    blind = utils.process_results_blind(FIRST, [reply])
    assert blind == utils.process_results(FIRST, [reply]) | {"video_input": "none"}


RESULTS_CASES = {  # (the replies given, FIBER_SKIP_MISSING_VIDEOS=1 with FIRST's video removed, what is logged)
    "no reply": ([], False, {"prediction": "", "answered": 100.0, "exact_match": 0.0}),
    "a reply of None": ([None], False, {"prediction": "", "answered": 100.0, "f1": 0.0}),
    "a clip without its video": (["a pizza"], True, {"prediction": "", "answered": 0.0, "missing": True}),
}


@pytest.mark.parametrize("case", RESULTS_CASES)
def test_no_reply_is_an_empty_answer_and_a_clip_without_its_video_is_missing(case, videos, tmp_path, reader_env):
    replies, without_video, expected = RESULTS_CASES[case]
    reader_env.setenv("FIBER_VIDEO_DIR", str(without_first(videos, tmp_path / "v") if without_video else videos))
    reader_env.setenv("FIBER_SKIP_MISSING_VIDEOS", "1")
    logged = utils.process_results(FIRST, replies)
    assert logged.items() >= (KEY | expected).items(), logged
    assert ("exact_match" in logged) != without_video  # no scores: it was not answered


@pytest.mark.parametrize("asked, steps", [("1", ["noun_phrase"]), ("0", [])])
def test_the_reading_is_logged_with_every_sample(asked, steps, reader_env):
    reader_env.setenv("FIBER_READ_NOUN_PHRASES", asked)
    reader = utils.process_results_blind(FIRST, ["a pizza"])["reader"]
    assert reader == reader_settings(utils.reader_pipeline()) and reader["readings"][6:] == steps


def without_first(videos, folder):
    shutil.copytree(videos, folder)
    (folder / CLIP_FILE).unlink()
    return folder


def records_with(field, value, rows):
    """The test split with `value(old)` in `field` of `rows`, as a dataset made by other means may hold it."""
    return [record | ({field: value(record[field])} if index in rows else {}) for index, record in enumerate(RECORDS)]


DOCS_CASES = {
    "no FIBER_VIDEO_DIR": (lambda v, t: None, RECORDS, UsageError, "the folder named by FIBER_VIDEO_DIR: set it$"),
    "no such folder": (lambda v, t: t / "absent", RECORDS, DataError, "FIBER_VIDEO_DIR=.*absent: no such folder$"),
    "a clip without a video": (without_first, RECORDS, DataError, f"no video for clip {FIRST['video_id']} \\(123-133 "
                               "s\\)"
                               f": looked for {CLIP_FILE[:-4]}.mp4 or .*; 1 of 60 clips have no usable video$"),
    "a whole video": (lambda v, t: write_video(without_first(v, t) / f"{FIRST['video_id']}.mp4", 140, 1) or t, RECORDS,
                      DataError, "but lmms-eval's models read whole files: the clip needs a file of its own, "
                      f"{CLIP_FILE}; 1 of 60"),
    "not a video": (lambda v, t: (without_first(v, t) / CLIP_FILE).write_text("x") and t, RECORDS, DataError,
                    f"{CLIP_FILE}: cannot be decoded .*; 1 of 60 clips have no usable video$"),
    "a webm": (lambda v, t: shutil.copy(v / CLIP_FILE, without_first(v, t) / f"{CLIP_FILE[:-4]}.webm") and t, RECORDS,
               DataError, f"read clips from .mp4 files; convert it to {CLIP_FILE}; 1 of 60"),
    "a video id out of the folder": (lambda v, t: v, records_with("video_id", lambda _: "../evil", [1]), DataError,
                                     "record 1: field 'video_id': '../evil' is not a plain video id"),
    "a caption without a blank": (lambda v, t: v, records_with("masked_caption", lambda _: "No blank.", [1]), DataError,
                                  "record 1: field 'masked_caption': expected exactly one blank"),
    "times as text": (lambda v, t: v, records_with("video_start_time", str, range(60)), DataError,
                      r"record 0: field 'video_start_time': must be a whole number of seconds.*; 60 of 60 docs"),
}


@pytest.mark.parametrize("case", DOCS_CASES)
def test_every_doc_and_its_video_is_checked_before_any_generation(case, videos, tmp_path, reader_env):
    make, records, error, pattern = DOCS_CASES[case]
    folder = make(videos, tmp_path / "videos")
    reader_env.setenv("FIBER_VIDEO_DIR", str(folder)) if folder else reader_env.delenv("FIBER_VIDEO_DIR", raising=False)
    with pytest.raises(error, match=pattern) as raised:
        utils.process_docs(Dataset.from_list(records, split="test"))
    assert "\n" not in str(raised.value)


def test_the_docs_pass_and_without_a_spacy_pipeline_the_task_refuses(videos, tmp_path, reader_env):
    """Never a silent reading without the noun-phrase step (other answers): FIBER_READ_NOUN_PHRASES=0 asks for it.
    A clip without its video passes with FIBER_SKIP_MISSING_VIDEOS=1, sent without one; the blind task reads none."""
    split = Dataset.from_list(RECORDS)
    reader_env.setenv("FIBER_VIDEO_DIR", str(videos))
    assert utils.process_docs(split) is split and utils.doc_to_visual(FIRST) == [str(videos / CLIP_FILE)]
    reader_env.setenv("FIBER_VIDEO_DIR", str(without_first(videos, tmp_path / "v")))
    reader_env.setenv("FIBER_SKIP_MISSING_VIDEOS", "1")
    assert utils.process_docs(split) is split and utils.doc_to_visual(FIRST) == []
    reader_env.delenv("FIBER_VIDEO_DIR")
    assert utils.process_docs_blind(split) is split
    reader_env.setenv("FIBERBENCH_SPACY_MODEL", "en_core_web_absent")
    utils.reader_pipeline.cache_clear()
    with pytest.raises(UsageError, match=r"noun-phrase step cannot run: .* set FIBER_READ_NOUN_PHRASES=0$"):
        utils.process_docs_blind(split)
    reader_env.setenv("FIBER_READ_NOUN_PHRASES", "no")
    utils.reader_pipeline.cache_clear()
    with pytest.raises(UsageError, match="^FIBER_READ_NOUN_PHRASES=no: 1 .* 0 without it$"):
        utils.reader_pipeline()


def lmms_eval(cwd, video_dir, model, output_path, *flags, backend: str = "qwen2_vl", tasks="fiber_test", env=None):
    """The lmms-eval CLI on FIBER's test split (`tasks`) with a tiny model on the CPU, offline; a fresh datasets cache
    (it keys a local folder by its name, so an older `fiber` could be read)."""
    environment = {**os.environ, "FIBER_VIDEO_DIR": str(video_dir), "HF_HOME": str(cwd / "hf"), "HF_HUB_OFFLINE": "1",
                   "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    command = [sys.executable, "-m", "lmms_eval", "eval", "--model", backend, "--device", "cpu", "--model_args",
               f"pretrained={model},device_map=cpu,max_num_frames=4", "--include_path", str(TASK_PATH), "--tasks",
               tasks, "--batch_size", "1", "--log_samples", "--output_path", str(output_path), *flags]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def lmms_eval_run(tmp_path_factory, videos):
    """A folder with the sample built as `fiber` and a tiny Qwen2-VL; the lmms-eval run's results file."""
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
    nlp = utils.reader_pipeline()
    assert [sample["prediction"] for sample in logged] == [
        read_answer(sample["filtered_resps"], RECORDS[sample["doc_id"]]["masked_caption"], nlp) for sample in logged]
    assert len(logged) == 60 and all(sample["reader"] == reader_settings(nlp) for sample in logged)
    flags = ["--dataset_name", str(folder / "fiber"), "--output_dir", str(folder / "evaluation")]
    assert main(["evaluate", str(samples), *flags, "--num_bootstrap", "100", "--names", "lmms-eval"]) == 0
    evaluated = json.loads((folder / "evaluation" / "results.json").read_text())["systems"]["lmms-eval"]
    assert evaluated["reading"] == reader_settings(nlp)
    for metric in ("exact_match", "f1", "exact_match_label_only", "f1_label_only"):
        assert scores[f"{metric},none"] == pytest.approx(evaluated[metric], abs=1e-9), metric
    answers = [(sample["prediction"], RECORDS[sample["doc_id"]]) for sample in logged]
    for metric, score in (("vqa_accuracy", lambda answer, doc: vqa_accuracy(answer, annotators_from_example(doc))),
                          ("f1_release", lambda answer, doc: f1_release(answer, references_from_example(doc)))):
        assert scores[f"{metric},none"] == pytest.approx(sum(score(*pair) for pair in answers) / 60, abs=1e-9)
    assert scores["answered,none"] == 100.0


@pytest.mark.video
@pytest.mark.slow
def test_the_blind_task_and_a_clip_without_its_video_through_lmms_eval(lmms_eval_run, videos, tmp_path):
    """fiber_test with FIBER_SKIP_MISSING_VIDEOS=1 keeps the clip without a video, logged as missing and unscored; its
    reply, made without the video, is the blind task's, which reads no video at all."""
    folder, _ = lmms_eval_run
    lmms_eval(folder, without_first(videos, tmp_path / "videos"), folder / "qwen2_vl", tmp_path / "results", "--limit",
              "3", tasks="fiber_test,fiber_test_blind", env={"FIBER_SKIP_MISSING_VIDEOS": "1"})
    [results] = (tmp_path / "results").rglob("*_results.json")
    scores = json.loads(results.read_text())["results"]
    samples = {task: [json.loads(line) for line in next((tmp_path / "results").rglob(f"*_samples_{task}.jsonl"))
                      .read_text().splitlines()] for task in ("fiber_test", "fiber_test_blind")}
    with_video, blind = samples["fiber_test"], samples["fiber_test_blind"]
    assert [sample["doc_id"] for sample in with_video] == [sample["doc_id"] for sample in blind] == [0, 1, 2]
    assert with_video[0]["missing"] is True and with_video[0]["prediction"] == "" and "f1" not in with_video[0]
    assert not any("missing" in sample for sample in with_video[1:] + blind)
    assert {sample["video_input"] for sample in blind} == {"none"}
    assert with_video[0]["filtered_resps"] == blind[0]["filtered_resps"]
    assert scores["fiber_test"]["answered,none"] == pytest.approx(200 / 3) and "f1,none" in scores["fiber_test"]
    assert scores["fiber_test"]["f1,none"] == pytest.approx((with_video[1]["f1"] + with_video[2]["f1"]) / 2)
    assert scores["fiber_test_blind"]["answered,none"] == 100.0


@pytest.mark.video
@pytest.mark.slow
def test_lmms_eval_with_a_missing_video_names_the_clip(lmms_eval_run, videos, tmp_path):
    folder, _ = lmms_eval_run
    result = lmms_eval(folder, without_first(videos, tmp_path / "videos"), folder / "qwen2_vl", tmp_path / "results")
    assert result.returncode == 0 and not list((tmp_path / "results").rglob("*_results.json"))  # lmms-eval's choice
    assert f"no video for clip {FIRST['video_id']} (123-133 s): looked for {CLIP_FILE}" in result.stderr


@pytest.mark.video
@pytest.mark.slow
def test_a_chat_backend_runs_the_same_task(lmms_eval_run, videos, tmp_path):
    """lmms-eval's `qwen2_5_vl` backend is a chat model (the task's visual and text become messages), as vLLM's is."""
    folder, _ = lmms_eval_run
    save_video_family("qwen2_5_vl", tmp_path / "qwen2_5_vl")
    lmms_eval(folder, videos, tmp_path / "qwen2_5_vl", tmp_path / "results", "--limit", "4", backend="qwen2_5_vl")
    [results] = (tmp_path / "results").rglob("*_results.json")
    assert json.loads(results.read_text())["config"]["model_backend"].endswith("(chat)")
    [samples] = (tmp_path / "results").rglob("*_samples_fiber_test.jsonl")
    keys = [tuple(json.loads(line)[field] for field in utils.KEY_FIELDS) for line in samples.read_text().splitlines()]
    assert keys == [tuple(record[field] for field in utils.KEY_FIELDS) for record in RECORDS[:4]]
