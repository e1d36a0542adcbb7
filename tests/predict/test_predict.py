"""`fiberbench predict` with each kind of model: one row per clip in dataset order, in the format `evaluate` scores,
and the settings it depends on recorded beside it; each kind run blind (--video_input none), the control."""

import logging
import shutil

import pytest
from transformers import AutoConfig

from fiberbench.modeling import FiberT5ForConditionalGeneration
from fiberbench.models import model_files
from fiberbench.predict.arguments import MODEL_TYPES, parser_of
from fiberbench.predict.predictors import KINDS, choose_kind
from fiberbench.predict.prompts import DEFAULT_PROMPT
from fiberbench.predict.replies import read_answers
from fiberbench.records import clip_id, clips_fingerprint

from .conftest import CAPTIONS, KEYS, SPACY, metadata, predict, read_evaluate_format, scored_by_evaluate, videos_but_one

# kind -> (extra flags, beams by default, what the metadata's prompt section holds, how it sees the video)
RUNS = {"seq2seq": ([], 8, "format", "none"), "causal": ([], 1, "template", "none"),
        "fiber": ([], 4, "format", "features"), "video": (["--num_frames", "4"], 1, "template", "images")}


def test_every_kind_of_model_is_a_model_type_and_each_is_run_here():
    """--model_type's choices (in the light flags module) are the kinds `predict` loads, each run below."""
    assert tuple(KINDS) == MODEL_TYPES and set(RUNS) == set(KINDS)


@pytest.mark.slow
@pytest.mark.parametrize("kind", RUNS)
def test_predict_writes_a_row_per_clip_that_evaluate_scores(kind, tiny_models, video_dir, tmp_path, nlp, caplog):
    caplog.set_level(logging.INFO)
    flags, num_beams, prompt_field, video_input = RUNS[kind]
    config = AutoConfig.from_pretrained(tiny_models[kind])
    video = ["--video_dir", video_dir] if kind == "video" else []
    args = parser_of().parse_args(["--model_name_or_path", "m", *map(str, flags + video)])
    assert choose_kind(args, config) == kind  # read from the config
    output_file = tmp_path / "predictions.jsonl"
    assert predict(tiny_models[kind], output_file, *flags, *video, *SPACY) == 0

    rows = read_evaluate_format(output_file, num_beams, replies=kind in ("causal", "video"))
    assert [tuple(row[field] for field in ("video_id", "video_start_time", "video_end_time")) for row in rows] == KEYS
    record = metadata(output_file)
    settings = record.pop("settings")
    assert record == {"written_by": "fiberbench predict", "state": "complete", "fiberbench_version": settings[
        "fiberbench_version"], "output": {"rows": 60, "answered": 60, "missing_clips": [],
                                          "clips_fingerprint": clips_fingerprint(clip_id(*key) for key in KEYS)}}
    assert settings["video_input"] == video_input
    assert settings["model"] == {
        "name_or_path": str(tiny_models[kind]), "revision": None, "commit": None, "kind": kind,
        "architectures": config.architectures, "dtype": "float32", "files": model_files(str(tiny_models[kind]))}
    assert settings["dataset"].pop("fingerprint").startswith("sha256:")
    assert settings["dataset"] == {"name": None, "config": "i3d" if kind == "fiber" else "text", "split": "test",
                                   "clips": 60, "synthetic": True}
    assert (settings["decoding"]["num_beams"], settings["decoding"]["only_noun_phrases"]) == (num_beams, num_beams > 1)
    assert prompt_field in settings["prompt"] and settings["prompt"]["example"]
    if kind in ("causal", "video"):  # the answers are the reader's, noun-phrase step included, of the replies kept
        assert settings["reader"]["readings"][-1] == "noun_phrase"
        assert [row["prediction"] for row in rows] == read_answers([row["raw"][0] for row in rows], CAPTIONS, nlp)
    else:
        assert settings["reader"] is None
    if kind == "video":  # the tiny LLaVA's processor has no video processor: the frames go in as images
        assert settings["video"] | {"frames": None} == {
            "num_frames": 4, "fps": None, "max_frames": None, "frames": None,
            "chosen_by": "--num_frames", "processor_defaults": {}, "video_metadata": None}
        assert settings["prompt"]["example"].count("<image>") == 4
    assert f"Wrote 60 predictions to {output_file}" in caplog.text
    scored_by_evaluate(output_file, tmp_path / "scores", num_beams)

    caplog.clear()  # the same command again: nothing to do, the file as it was
    written = output_file.read_bytes()
    assert predict(tiny_models[kind], output_file, *flags, *video, *SPACY) == 0
    assert "is complete, made with these settings: nothing to do" in caplog.text and output_file.read_bytes() == written


PLAIN = DEFAULT_PROMPT.replace("{masked_caption}", "{caption}")


@pytest.mark.parametrize("kind, flags, example", [
    ("causal", ["--prompt", "Caption: {masked_caption} Answer:"], "user: Caption: {caption} Answer:\nassistant:"),
    ("causal", ["--no_chat_template"], PLAIN),
    ("video", ["--no_chat_template", "--num_frames", 3], "<image>" * 3 + PLAIN),
], ids=["a chat template", "no chat template", "a video LLM without a chat template"])
def test_the_prompt_goes_through_the_chat_template_when_there_is_one(kind, flags, example, tiny_models, video_dir,
                                                                      tmp_path):
    model, output_file = tiny_models[kind], tmp_path / "predictions.jsonl"
    if "--no_chat_template" in flags:  # the model saved without its chat template
        model, flags = shutil.copytree(model, tmp_path / "plain"), flags[1:]
        (model / "chat_template.jinja").unlink()
    flags += ["--video_dir", video_dir] if kind == "video" else []
    assert predict(model, output_file, *flags, "--max_predict_samples", 2, "--no_read_noun_phrases") == 0
    assert metadata(output_file)["settings"]["prompt"]["example"] == example.format(caption=CAPTIONS[0])
    assert len(read_evaluate_format(output_file, num_beams=1, replies=True)) == 2


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["causal", "fiber", "video"])
def test_the_same_file_with_any_number_of_data_loader_workers_and_with_device_map(kind, tiny_models, video_dir,
                                                                                   tmp_path, caplog):
    """Three batches of 4, made by 0 or 2 workers (a video LLM's frames decoded there; a FIBER model's features read
    there), or with the model placed by Accelerate (--device_map auto: all on the CPU here)."""
    caplog.set_level(logging.INFO)
    flags = ["--max_predict_samples", 11, "--per_device_eval_batch_size", 4, *SPACY]
    if kind == "video":  # with a clip without its video, skipped in its batch
        flags += ["--video_dir", videos_but_one(video_dir, tmp_path), "--num_frames", 2, "--skip_missing_videos"]
    files = []
    for run, extra in enumerate((("--dataloader_num_workers", 0), ("--dataloader_num_workers", 2),
                                 ("--device_map", "auto"))):
        files.append(tmp_path / f"{run}.jsonl")
        assert predict(tiny_models[kind], files[-1], *flags, *extra) == 0
    assert "inputs made in this process" in caplog.text and "inputs made by 2 data loader workers" in caplog.text
    assert files[0].read_bytes() == files[1].read_bytes() == files[2].read_bytes()
    rows = read_evaluate_format(files[0], 4 if kind == "fiber" else 1, replies=kind != "fiber")
    assert len(rows) == 11 and (kind != "video" or rows[1]["prediction"] == "" and rows[1]["raw"] == [])



@pytest.mark.parametrize("kind, with_video", [("fiber", []), ("video", ["--num_frames", 2]), ("causal", [])])
def test_a_blind_control_is_recorded_and_a_rerun_with_the_video_is_refused(kind, with_video, tiny_models, video_dir,
                                                                          tmp_path, cli_error):
    """The same model, prompt and decoding without the video; a text model is blind already: its run is the same."""
    model, output_file, flags = tiny_models[kind], tmp_path / "blind.jsonl", ["--max_predict_samples", 3, *SPACY]
    assert predict(model, output_file, "--video_input", "none", *flags) == 0
    settings = metadata(output_file)["settings"]
    assert (settings["video_input"], settings["video"], settings["dataset"]["config"]) == ("none", None, "text")
    assert "<image>" not in settings["prompt"]["example"]  # the tiny LLaVA's chat without its video part
    assert settings["decoding"]["num_beams"] == RUNS[kind][1]
    if kind == "causal":
        assert predict(model, output_file, *flags) == 0  # the same settings: nothing to do
        return
    video = ["--video_dir", video_dir] if kind == "video" else []
    status, line = cli_error("predict", "--model_name_or_path", model, "--output_file", output_file, *video,
                             *with_video, *flags)
    seen = RUNS[kind][3]
    assert status == 2 and f'other settings (video_input: "{seen}" here, "none" there' in line, line


def test_a_blind_fiber_model_answers_as_its_weights_without_the_video_modules(tiny_models, tmp_path):
    """Early fusion with its video withheld is T5 over the caption: the same answers as the model loaded without its
    video modules (fusion="none"), beam for beam."""
    text_only = shutil.copytree(tiny_models["fiber"], tmp_path / "text_only")  # its processor, then its weights
    FiberT5ForConditionalGeneration.from_pretrained(tiny_models["fiber"], fusion="none").save_pretrained(text_only)
    flags = ["--max_predict_samples", 6, "--num_beams", 4, *SPACY]
    assert predict(tiny_models["fiber"], tmp_path / "blind.jsonl", "--video_input", "none", *flags) == 0
    assert predict(text_only, tmp_path / "text_only.jsonl", *flags) == 0
    assert (tmp_path / "blind.jsonl").read_bytes() == (tmp_path / "text_only.jsonl").read_bytes()
