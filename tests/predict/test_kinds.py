"""`fiberbench predict` with each kind of model: a row per clip of the split, in dataset order and evaluate's format."""

import json
import logging

import pytest
from fiberbench.modeling.noun_phrases import load_spacy_pipeline

from fiberbench.cli import main
from fiberbench.files import file_digest, folder_fingerprint
from fiberbench.predict.kinds import KIND_NAMES, KINDS, PROMPTED_KINDS, detect_kind
from fiberbench.predict.prompts import DEFAULT_PROMPT
from fiberbench.predict.replies import read_answers
from fiberbench.testing.tiny_models import save_causal, save_video

from .conftest import clip_keys, read_evaluate_format, sample_test_records, scored_by_evaluate

# kind -> (extra flags, beams the run uses by default, what the metadata's prompt section holds)
RUNS = {
    "seq2seq": ([], 8, "format"),
    "causal": ([], 1, "template"),
    "fiber": ([], 4, "format"),
    "video": (["--num_frames", "4"], 1, "template"),
}


def predict(model, output_file, *flags) -> int:
    """`fiberbench predict` of `model` into `output_file`: its exit status."""
    return main(["predict", "--model_name_or_path", str(model), "--output_file", str(output_file), *map(str, flags)])


def test_every_kind_has_a_predictor():
    assert set(KINDS) == set(KIND_NAMES) == set(RUNS)


@pytest.mark.parametrize("kind", RUNS)
def test_the_kind_is_read_from_the_config(kind, tiny_models):
    import fiberbench.modeling  # noqa: F401 - registers the FIBER config
    from transformers import AutoConfig

    assert detect_kind(AutoConfig.from_pretrained(tiny_models[kind])) == kind


@pytest.mark.slow
@pytest.mark.parametrize("kind", RUNS)
def test_predict_writes_one_row_per_clip(kind, tiny_models, video_dir, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    flags, num_beams, prompt_field = RUNS[kind]
    output_file = tmp_path / "predictions.jsonl"
    video = ["--video_dir", str(video_dir)] if kind == "video" else []
    assert predict(tiny_models[kind], output_file, *flags, *video) == 0

    rows = read_evaluate_format(output_file, num_beams, replies=kind in PROMPTED_KINDS)
    assert clip_keys(rows) == clip_keys(sample_test_records())
    assert any(row["prediction"] for row in rows)
    metadata = json.loads(output_file.with_name("predictions.metadata.json").read_text(encoding="utf-8"))
    settings = metadata["settings"]
    assert settings["model"] == {
        "name_or_path": str(tiny_models[kind]),
        "revision": None,
        "commit": None,
        "kind": kind,
        "architectures": json.loads((tiny_models[kind] / "config.json").read_text())["architectures"],
        "dtype": "float32",
        "files": folder_fingerprint(tiny_models[kind]),
    }
    assert settings["model"]["files"]["model.safetensors"].endswith(file_digest(tiny_models[kind] / "model.safetensors"))
    fingerprint = settings["dataset"].pop("fingerprint")
    assert settings["dataset"] == {
        "name": None,
        "config": "i3d" if kind == "fiber" else "text",
        "split": "test",
        "clips": len(rows),
        "synthetic": True,
    }
    assert fingerprint.startswith("sha256:") and len(fingerprint) == len("sha256:") + 64
    assert settings["decoding"]["num_beams"] == num_beams
    assert settings["decoding"]["only_noun_phrases"] is (num_beams > 1)
    assert prompt_field in settings["prompt"] and settings["prompt"]["example"]
    assert settings["fiberbench_version"]
    assert metadata["output"] == {"rows": len(rows), "skipped_missing_videos": []}
    assert f"Wrote {len(rows)} predictions to {output_file}" in caplog.text
    if kind in PROMPTED_KINDS:
        # The answers are the reader's reading of the replies kept, with its noun-phrase step (a pipeline is installed).
        assert settings["reader"]["readings"][-1] == "noun_phrase"
        nlp = load_spacy_pipeline(settings["reader"]["spacy_model"].rsplit("-", 1)[0])
        captions = [record["masked_caption"] for record in sample_test_records()]
        assert [row["prediction"] for row in rows] == read_answers([row["raw"][0] for row in rows], captions, nlp)
    else:
        assert settings["reader"] is None
    if kind == "video":  # the tiny LLaVA's processor has no video processor: the frames go in as images
        assert settings["video"] == {
            "input": "images",
            "num_frames": 4,
            "fps": None,
            "max_frames": None,
            "frames": "4 frames: the frames on screen at the centres of equal parts of the clip's [start, end)",
            "chosen_by": "--num_frames",
            "processor_defaults": {},
            "video_metadata": None,
        }
        assert settings["prompt"]["example"].count("<image>") == 4
    scored_by_evaluate(output_file, tmp_path / "scores", num_beams)


def test_causal_prompt_through_the_chat_template(tiny_models, tmp_path):
    output_file = tmp_path / "predictions.jsonl"
    template = "Caption: {masked_caption} Answer:"
    flags = ["--prompt", template, "--max_predict_samples", 3, "--num_beams", 2, "--no_only_noun_phrases"]
    assert predict(tiny_models["causal"], output_file, *flags) == 0
    settings = json.loads(output_file.with_name("predictions.metadata.json").read_text())["settings"]
    caption = sample_test_records()[0]["masked_caption"]
    assert settings["prompt"]["template"] == template
    assert settings["prompt"]["example"] == f"user: Caption: {caption} Answer:\nassistant:"
    assert settings["decoding"] == {
        "num_beams": 2,
        "max_new_tokens": 10,
        "do_sample": False,
        "only_noun_phrases": False,
        "spacy_model": None,
    }
    rows = read_evaluate_format(output_file, num_beams=2, replies=True)
    assert all(row["prediction"] == row["candidates"][0] for row in rows)


def test_causal_prompt_without_a_chat_template(tmp_path):
    folder = tmp_path / "plain"
    save_causal(folder, chat_template=None)
    output_file = tmp_path / "predictions.jsonl"
    assert predict(folder, output_file, "--max_predict_samples", 2) == 0
    prompt = json.loads(output_file.with_name("predictions.metadata.json").read_text())["settings"]["prompt"]
    assert prompt["chat_template"] is None
    assert prompt["example"] == DEFAULT_PROMPT.format(masked_caption=sample_test_records()[0]["masked_caption"])
    assert len(read_evaluate_format(output_file, num_beams=1, replies=True)) == 2


def test_video_prompt_without_a_chat_template(tmp_path, video_dir):
    folder = tmp_path / "plain_video"
    save_video(folder)
    (folder / "chat_template.jinja").unlink()
    output_file = tmp_path / "predictions.jsonl"
    assert predict(folder, output_file, "--video_dir", video_dir, "--num_frames", 3, "--max_predict_samples", 2) == 0
    prompt = json.loads(output_file.with_name("predictions.metadata.json").read_text())["settings"]["prompt"]
    caption = sample_test_records()[0]["masked_caption"]
    assert prompt["chat_template"] is None
    assert prompt["example"] == "<image>" * 3 + DEFAULT_PROMPT.format(masked_caption=caption)
    assert len(read_evaluate_format(output_file, num_beams=1, replies=True)) == 2


def test_device_map_spreads_the_model_with_the_same_answers(tiny_models, tmp_path):
    """--device_map auto (on this machine: all on the CPU, through Accelerate's placement) answers as one device."""
    answers = {}
    for flags in ([], ["--device_map", "auto"]):
        output_file = tmp_path / f"predictions{len(flags)}.jsonl"
        assert predict(tiny_models["causal"], output_file, "--max_predict_samples", 4, *flags) == 0
        answers[len(flags)] = [row["prediction"] for row in read_evaluate_format(output_file, 1, replies=True)]
    assert answers[0] == answers[2]


def test_device_map_under_accelerate_launch_is_refused(tiny_models, tmp_path, monkeypatch, cli_error):
    monkeypatch.setenv("WORLD_SIZE", "2")  # as accelerate launch sets it for two processes
    flags = ["--model_name_or_path", tiny_models["causal"], "--device_map", "auto"]
    status, line = cli_error("predict", *flags, "--output_file", tmp_path / "p.jsonl")
    assert status == 2 and "--device_map spreads one model over the GPUs in one process" in line
