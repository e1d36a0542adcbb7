"""Nine video-LLM families through `fiberbench predict`'s video path and its images path, on synthetic videos: tiny
random models built from their configs (`fiberbench.testing.video_families`), saved and loaded as Hub folders are.
What a model receives is read at its forward (a pre-hook): on the video path the family's own video placeholders and
video tensors, on the images path images. They need the video environment (torchvision): `pytest -m video`."""

import json
import re
import shutil

import pytest
import torch

from fiberbench.model_config import load_config
from fiberbench.models import locate_model
from fiberbench.predict.arguments import parser_of
from fiberbench.predict.predictors import choose_kind, make_predictor
from fiberbench.testing.tiny_models import CHAT_TEMPLATE
from fiberbench.testing.video_families import VIDEO_FAMILIES, save_video_family
from fiberbench.videos import find_clip_video

from .conftest import CAPTIONS, KEYS, SPACY, metadata, predict, read_evaluate_format, scored_by_evaluate, write_video

pytestmark = pytest.mark.video

# Family -> (text only the video path puts in the input, text only the images path puts there). SmolVLM and InternVL
# read a video as its frames' image tokens, labelled with their times (SmolVLM) or numbers (InternVL); GLM-4.1V puts
# them between its begin- and end-of-video tokens, each followed by its time. Their images path has no token of its own.
MARKERS = {"qwen2_vl": ("<|video_pad|>", "<|image_pad|>"), "qwen2_5_vl": ("<|video_pad|>", "<|image_pad|>"),
           "qwen3_vl": ("<|video_pad|>", "<|image_pad|>"), "llava_onevision": ("<video>", "<image>"),
           "llava_next_video": ("<video>", "<image>"), "video_llava": ("<video>", "<image>"),
           "smolvlm": ("Frame from", None), "internvl": ("Frame1:", None), "glm4v": ("<|begin_of_video|>", None)}
FRAMES_AS_PIXEL_VALUES = ("smolvlm", "internvl")  # their video processors give the frames as images' pixels
# The frames' times written into the prompt from the video metadata. The first clip's 4 frames (10 s at 2 fps, sampled
# at 1.25, 3.75, 6.25, 8.75 s) come on screen 1, 3.5, 6, 8.5 s in; Qwen3-VL gives the mean of each pair, GLM the first.
TIMESTAMPS = {"qwen3_vl": "<2.2 seconds>", "smolvlm": "Frame from 00:03", "glm4v": "<|end_of_image|> 6"}


@pytest.fixture(scope="module")
def family_models(tmp_path_factory):
    """Family -> the folder of its tiny random model, saved once per module when first asked for."""
    root, folders = tmp_path_factory.mktemp("video_llms"), {}
    return lambda family: folders.get(family) or folders.setdefault(family, save_video_family(family, root / family) or
                                                                     root / family)


def first_forward(model, video_dir, *flags) -> tuple:
    """The predictor `predict` makes for `model`, and the inputs (not None) of its model's first forward on 2 clips."""
    args = parser_of().parse_args(["--model_name_or_path", str(model), "--video_dir", str(video_dir), "--prompt",
                                   "{masked_caption}", *map(str, flags)])
    source = locate_model(args.model_name_or_path)
    config = load_config(source)
    predictor = make_predictor(choose_kind(args, config), args, source, config)
    predictor.load_model(torch.device("cpu"), torch.float32)
    calls = []
    predictor.model.register_forward_pre_hook(lambda _, args, kwargs: calls.append(kwargs), with_kwargs=True)
    rows = [{"masked_caption": text, "video": find_clip_video(video_dir, *key)} for text, key in zip(CAPTIONS, KEYS)]
    assert len(predictor.generate(predictor.inputs(rows[:2]))) == 2  # a clip file and a whole video cut
    return predictor, {name: value for name, value in calls[0].items() if value is not None}


def modalities(inputs: dict) -> set[str]:
    """What the model encodes: transformers' generate encodes the media of the models that support it before their
    forward (`mm_encoder_outputs`, by modality); the others get the pixels in their forward."""
    if "mm_encoder_outputs" in inputs:
        return set(inputs["mm_encoder_outputs"])
    names = {"pixel_values_videos": "video", "pixel_values": "image", "pixel_values_images": "image"}
    return {modality for name, modality in names.items() if name in inputs}


@pytest.mark.parametrize("family", MARKERS)
def test_the_model_receives_the_family_video_tokens_and_predicts(family, family_models, video_dir, tmp_path):
    video_marker, image_marker = MARKERS[family]
    as_video, inputs = first_forward(family_models(family), video_dir, "--num_frames", 4)
    text = as_video.processor.tokenizer.decode(inputs["input_ids"][0])
    assert as_video.video_input == "video" and video_marker in text and (image_marker or "!") not in text, text
    assert TIMESTAMPS.get(family, "") in text, text
    assert modalities(inputs) == ({"image"} if family in FRAMES_AS_PIXEL_VALUES else {"video"})
    as_images, inputs = first_forward(family_models(family), video_dir, "--num_frames", 4, "--video_input", "images")
    text = as_images.processor.tokenizer.decode(inputs["input_ids"][0])
    assert video_marker not in text and (image_marker or "") in text and modalities(inputs) == {"image"}, text

    output_file = tmp_path / "predictions.jsonl"
    assert predict(family_models(family), output_file, "--video_dir", video_dir, "--num_frames", 4, *SPACY) == 0
    assert len(read_evaluate_format(output_file, num_beams=1, replies=True)) == 60
    settings = metadata(output_file)["settings"]
    assert settings["video_input"] == "video" and (settings["video"]["num_frames"], settings["video"]["chosen_by"]) == (
        4, "--num_frames")
    scored_by_evaluate(output_file, tmp_path / "scores", num_beams=1)


def test_another_input_the_processor_defaults_and_workers(family_models, video_dir, tmp_path, cli_error):
    """Qwen3-VL's video processor samples 2 frames a second: without --num_frames or --fps, so does predict; the same
    file whether 2 workers or this process decode and process the clips; another --video_input is another setting."""
    assert set(MARKERS) == set(VIDEO_FAMILIES)  # every family is tested
    flags = ["--video_dir", video_dir, "--max_predict_samples", 5, "--per_device_eval_batch_size", 2, *SPACY]
    files = [tmp_path / "0.jsonl", tmp_path / "2.jsonl"]
    for file, workers in zip(files, (0, 2)):
        assert predict(family_models("qwen3_vl"), file, *flags, "--dataloader_num_workers", workers) == 0
    assert files[0].read_bytes() == files[1].read_bytes()
    video = metadata(files[0])["settings"]["video"]
    assert video["chosen_by"] == "the defaults of Qwen3VLVideoProcessor"
    assert (video["fps"], video["num_frames"], video["max_frames"]) == (2, None, 768)
    assert video["processor_defaults"] == {"do_sample_frames": True, "fps": 2, "min_frames": 4, "max_frames": 768}
    status, line = cli_error("predict", "--model_name_or_path", family_models("qwen3_vl"), "--output_file", files[0],
                             *flags, "--video_input", "images")
    assert status == 2 and 'other settings (video_input: "images" here, "video" there' in line, line


def test_a_chat_template_without_a_video_part_is_one_line(family_models, video_dir, tmp_path, cli_error):
    model = tmp_path / "images_only_template"
    shutil.copytree(family_models("qwen2_vl"), model)
    (model / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    status, line = cli_error("predict", "--model_name_or_path", model, "--video_dir", video_dir, "--output_file",
                             tmp_path / "p.jsonl")
    assert status == 2 and line.endswith(
        "its processor (Qwen2VLProcessor): its chat template writes no <|video_pad|> for a video part, so the clip "
        "cannot be put in the prompt that way; try --video_input images"), line


def test_fewer_frames_than_the_family_reads_is_one_line_before_any_work(family_models, video_dir, tmp_path, cli_error):
    """Qwen3-VL's video processor needs 2 frames (its temporal patch); Qwen2-VL's repeats a lone frame."""
    flags = ["--video_dir", video_dir, "--output_file", tmp_path / "p.jsonl", "--num_frames", 1,
             "--max_predict_samples", 2]
    status, line = cli_error("predict", "--model_name_or_path", family_models("qwen3_vl"), *flags)
    assert status == 2 and re.search(r"its processor cannot read clip .* \(1 frames, chosen by --num_frames\)", line)
    assert not (tmp_path / "p.jsonl").exists()
    assert predict(family_models("qwen2_vl"), *flags[3:4], *flags[:2], *flags[4:], *SPACY) == 0


def test_frames_at_a_rate_in_a_batch_of_clips_of_different_lengths(family_models, video_dir, tmp_path):
    """--fps gives a 4 s clip 4 frames and 10 s clips 8 (--max_frames) in one batch: LLaVA-OneVision's processor stacks
    a batch's videos, so the clips go to the model in groups of equal frame counts."""
    videos = tmp_path / "videos"
    shutil.copytree(video_dir, videos)
    write_video(videos / "{}_{:06d}_{:06d}.mp4".format(*KEYS[0]), seconds=4, fps=2)
    output_file = tmp_path / "predictions.jsonl"
    assert predict(family_models("llava_onevision"), output_file, "--video_dir", videos, "--fps", 1, "--max_frames", 8,
                   "--max_predict_samples", 4, *SPACY) == 0
    assert len(read_evaluate_format(output_file, num_beams=1, replies=True)) == 4
    assert json.loads(output_file.with_name("predictions.metadata.json").read_text())["settings"]["video"]["fps"] == 1


def test_a_blind_video_llm_gets_the_chat_without_its_video_part(family_models, video_dir, tmp_path, cli_error):
    """--video_input none: the same model and prompt, no video token and no video tensor at its forward."""
    blind, inputs = first_forward(family_models("qwen2_vl"), video_dir, "--video_input", "none")
    text = blind.processor.tokenizer.decode(inputs["input_ids"][0])
    assert modalities(inputs) == set() and "<|vision_start|>" not in text and CAPTIONS[0] in text, text
    flags = ["--output_file", tmp_path / "blind.jsonl", "--max_predict_samples", 3, *SPACY]
    assert predict(family_models("qwen2_vl"), *flags[1:2], "--video_input", "none", *flags[2:]) == 0
    assert metadata(tmp_path / "blind.jsonl")["settings"]["video_input"] == "none"
    status, line = cli_error("predict", "--model_name_or_path", family_models("qwen2_vl"), "--video_dir", video_dir,
                             *flags)
    assert status == 2 and 'other settings (video_input: "video" here, "none" there' in line, line
