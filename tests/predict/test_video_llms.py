"""Nine video-LLM families through `fiberbench predict`'s video path, and their images path, on synthetic videos.

Each family is a tiny random model built from its config offline (`fiberbench.testing.video_families`),
saved and loaded back as a Hub model folder would be. What the model receives is read at its
forward (a pre-hook on the loaded model): on the video path, the family's own video placeholders
and video tensors, not images; on the images path, images. Then `fiberbench predict` answers every
test clip of the bundled sample and `fiberbench evaluate` scores the file. These tests need the
video environment (torchvision; README, "Tests"): they run with `pytest -m video`.
"""

import json
import re
import shutil

import pytest

from fiberbench.cli import main
from fiberbench.predict.arguments import parse_settings
from fiberbench.predict.kinds import predictor_of
from fiberbench.testing.video_families import VIDEO_FAMILIES, save_video_family
from fiberbench.videos import find_clip_video

from .conftest import clip_keys, read_evaluate_format, sample_test_records, scored_by_evaluate

pytestmark = pytest.mark.video

# Family -> (text that only the video path puts in the model's input, text that only the images path puts there).
# SmolVLM and InternVL read a video as its frames' image tokens, each frame labelled with its time
# (SmolVLM) or its number (InternVL); GLM-4.1V puts the frames' image tokens, each followed by its
# time, between its begin- and end-of-video tokens. Their images path has no token of its own.
MARKERS = {
    "qwen2_vl": ("<|video_pad|>", "<|image_pad|>"),
    "qwen2_5_vl": ("<|video_pad|>", "<|image_pad|>"),
    "qwen3_vl": ("<|video_pad|>", "<|image_pad|>"),
    "llava_onevision": ("<video>", "<image>"),
    "llava_next_video": ("<video>", "<image>"),
    "video_llava": ("<video>", "<image>"),
    "smolvlm": ("Frame from", None),
    "internvl": ("Frame1:", None),
    "glm4v": ("<|begin_of_video|>", None),
}
# The families whose video processor gives the frames as images' pixel values (the model reads them as frames).
FRAMES_AS_PIXEL_VALUES = ("smolvlm", "internvl")
# The families that write the frames' times into the prompt, from the clips' video metadata. The first
# clip's 4 frames (a 10 s clip at 2 fps, sampled at 1.25, 3.75, 6.25, 8.75 s) come on screen 1, 3.5, 6
# and 8.5 s into it; Qwen3-VL gives the mean time of each pair of frames, GLM-4.1V the first of each pair.
TIMESTAMPS = {"qwen3_vl": "<2.2 seconds>", "smolvlm": "Frame from 00:03", "glm4v": "<|end_of_image|> 6"}
NUM_FRAMES = 4


def test_every_family_is_tested():
    assert set(MARKERS) == set(VIDEO_FAMILIES)


@pytest.fixture(scope="module")
def family_models(tmp_path_factory):
    """Family -> the folder of its tiny random model, saved once per module."""
    root = tmp_path_factory.mktemp("video_llms")
    folders = {}

    def folder(family):
        if family not in folders:
            folders[family] = root / family
            save_video_family(family, folders[family])
        return folders[family]

    return folder


def predictor(model, video_dir, *flags):
    """`fiberbench predict`'s predictor of `model`, as the command makes it, with its weights loaded on the CPU."""
    import torch

    made = predictor_of(parse_settings(["--model_name_or_path", model, "--video_dir", video_dir, *flags]))
    assert made.kind.name == "video"
    made.load_model(torch.device("cpu"), torch.float32)
    return made


def first_forward(predictor, rows) -> dict:
    """The keyword arguments given (not None) to the model's first forward (the prompt's) while it replies to `rows`."""
    from fiberbench.videos import check_video

    # As the command does before the run: each caption's text rendered, for its clip's frame count.
    counts = [predictor.sampling.count(check_video(row["video"], predictor.sampling)) for row in rows]
    predictor.render_texts([row["masked_caption"] for row in rows], counts)
    calls = []
    hook = predictor.model.register_forward_pre_hook(lambda _, args, kwargs: calls.append(kwargs), with_kwargs=True)
    try:
        replies = predictor.replies(predictor.inputs(rows))
    finally:
        hook.remove()
    assert len(replies) == len(rows) and all(isinstance(generated, list) for generated in replies)
    return {name: value for name, value in calls[0].items() if value is not None}


def modalities(inputs: dict) -> set[str]:
    """What the model encodes of its input: 'video', 'image'. transformers' generate encodes the media of models that
    support it before their forward (`mm_encoder_outputs`, by modality); others get the pixels in their forward."""
    if "mm_encoder_outputs" in inputs:
        return set(inputs["mm_encoder_outputs"])
    pixels = {"pixel_values_videos": "video", "pixel_values": "image", "pixel_values_images": "image"}
    return {modality for name, modality in pixels.items() if name in inputs}


def clip_rows(video_dir, count: int) -> list[dict]:
    rows = []
    for record in sample_test_records()[:count]:
        video = find_clip_video(video_dir, record["video_id"], record["video_start_time"], record["video_end_time"])
        rows.append({"masked_caption": record["masked_caption"], "video": video})
    return rows


@pytest.mark.parametrize("family", VIDEO_FAMILIES)
def test_the_model_receives_the_family_video_tokens(family, family_models, video_dir):
    video_marker, image_marker = MARKERS[family]
    # A clip file and a whole video cut to its clip (the fixture's first two clips).
    rows = clip_rows(video_dir, 2)

    as_video = predictor(family_models(family), video_dir, "--num_frames", str(NUM_FRAMES))
    assert as_video.video_input == "video"  # auto: the processor has a video processor
    inputs = first_forward(as_video, rows)
    text = as_video.processor.tokenizer.decode(inputs["input_ids"][0])
    assert video_marker in text, text
    assert image_marker is None or image_marker not in text, text
    assert family not in TIMESTAMPS or TIMESTAMPS[family] in text, text
    assert modalities(inputs) == ({"image"} if family in FRAMES_AS_PIXEL_VALUES else {"video"})
    assert as_video.num_visual_tokens(inputs) > 0

    as_images = predictor(family_models(family), video_dir, "--num_frames", str(NUM_FRAMES), "--video_input", "images")
    inputs = first_forward(as_images, rows)
    text = as_images.processor.tokenizer.decode(inputs["input_ids"][0])
    assert video_marker not in text and (image_marker is None or image_marker in text), text
    assert modalities(inputs) == {"image"}


@pytest.mark.parametrize("family", VIDEO_FAMILIES)
def test_predict_and_evaluate(family, family_models, video_dir, tmp_path):
    model = family_models(family)
    output_file = tmp_path / "predictions.jsonl"
    flags = ["--video_dir", video_dir, "--num_frames", NUM_FRAMES, "--output_file", output_file]
    assert main(["predict", "--model_name_or_path", str(model), *map(str, flags)]) == 0
    rows = read_evaluate_format(output_file, num_beams=1, replies=True)
    assert clip_keys(rows) == clip_keys(sample_test_records())
    settings = json.loads(output_file.with_name("predictions.metadata.json").read_text())["settings"]
    assert settings["video"]["input"] == "video" and settings["video"]["num_frames"] == NUM_FRAMES
    assert settings["video"]["chosen_by"] == "--num_frames"
    scored_by_evaluate(output_file, tmp_path / "scores", num_beams=1)

    # The images path of the same model, on a few clips; a rerun with another input is refused like any other setting.
    images_file = tmp_path / "images.jsonl"
    images = ["--model_name_or_path", model, "--video_dir", video_dir, "--num_frames", NUM_FRAMES]
    images += ["--video_input", "images", "--max_predict_samples", 3, "--output_file", images_file]
    assert main(["predict", *map(str, images)]) == 0
    assert len(read_evaluate_format(images_file, num_beams=1, replies=True)) == 3
    metadata = json.loads(images_file.with_name("images.metadata.json").read_text())
    assert metadata["settings"]["video"]["input"] == "images"


def test_another_input_mode_is_a_changed_setting(family_models, video_dir, tmp_path, cli_error):
    model = family_models("qwen2_vl")
    output_file = tmp_path / "predictions.jsonl"
    flags = ["--model_name_or_path", model, "--video_dir", video_dir, "--output_file", output_file]
    flags += ["--num_frames", NUM_FRAMES, "--max_predict_samples", 2]
    assert main(["predict", *map(str, flags)]) == 0
    status, line = cli_error("predict", *flags, "--video_input", "images")
    assert status == 2
    changed = line.split("holds predictions made with other settings (")[1]
    assert changed.startswith('video.input: "images" here, "video" there')


def test_the_processor_defaults_choose_the_frames(family_models, video_dir, tmp_path):
    """Qwen3-VL's video processor samples 2 frames a second: without --num_frames or --fps, so does predict."""
    output_file = tmp_path / "predictions.jsonl"
    flags = ["--video_dir", video_dir, "--output_file", output_file, "--max_predict_samples", 2]
    assert main(["predict", "--model_name_or_path", str(family_models("qwen3_vl")), *map(str, flags)]) == 0
    video = json.loads(output_file.with_name("predictions.metadata.json").read_text())["settings"]["video"]
    assert video["chosen_by"] == "the defaults of Qwen3VLVideoProcessor"
    assert (video["fps"], video["num_frames"], video["max_frames"]) == (2, None, 768)
    assert video["processor_defaults"] == {"do_sample_frames": True, "fps": 2, "min_frames": 4, "max_frames": 768}


def test_a_chat_template_without_a_video_part_is_one_line(family_models, video_dir, tmp_path, cli_error):
    """A Qwen2-VL whose chat template writes images only: the clip cannot go in as a video, before any work."""
    from fiberbench.testing.tiny_models import CHAT_TEMPLATE

    model = tmp_path / "images_only_template"
    shutil.copytree(family_models("qwen2_vl"), model)
    (model / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    flags = ["--model_name_or_path", model, "--video_dir", video_dir, "--output_file", tmp_path / "p.jsonl"]
    status, line = cli_error("predict", *flags)
    assert status == 2
    assert line.endswith(
        "its processor (Qwen2VLProcessor): its chat template writes no <|video_pad|> for a video part, so the clip "
        "cannot be put in the prompt that way; try --video_input images"
    ), line
    assert not (tmp_path / "p.jsonl").exists()


def test_frames_at_a_rate_in_a_batch_of_clips_of_different_lengths(family_models, video_dir, tmp_path):
    """--fps gives a 4 s clip 4 frames and 10 s clips 8 (--max_frames) in one batch: LLaVA-OneVision's processor
    stacks a batch's videos, so the clips go to the model in groups of equal frame counts."""
    from fiberbench.testing.tiny_videos import write_video

    videos = tmp_path / "videos"
    shutil.copytree(video_dir, videos)
    first = sample_test_records()[0]
    write_video(videos / "{video_id}_{video_start_time:06d}_{video_end_time:06d}.mp4".format(**first), seconds=4, fps=2)
    output_file = tmp_path / "predictions.jsonl"
    flags = ["--model_name_or_path", family_models("llava_onevision"), "--video_dir", videos, "--fps", 1]
    flags += ["--max_frames", 8, "--max_predict_samples", 4, "--output_file", output_file]
    assert main(["predict", *map(str, flags)]) == 0
    assert len(read_evaluate_format(output_file, num_beams=1, replies=True)) == 4
    video = json.loads(output_file.with_name("predictions.metadata.json").read_text())["settings"]["video"]
    assert (video["input"], video["fps"], video["max_frames"], video["chosen_by"]) == ("video", 1, 8, "--fps")


def test_fewer_frames_than_the_family_reads_is_one_line_before_any_work(family_models, video_dir, tmp_path, cli_error):
    """Qwen3-VL's video processor needs 2 frames (its temporal patch): --num_frames 1 used to fail in the middle of
    the run; Qwen2-VL's repeats a lone frame, and takes it."""
    output_file = tmp_path / "predictions.jsonl"
    flags = ["--video_dir", video_dir, "--output_file", output_file, "--num_frames", 1, "--max_predict_samples", 2]
    status, line = cli_error("predict", "--model_name_or_path", family_models("qwen3_vl"), *flags)
    assert status == 2 and re.search(
        r"its video processor \(Qwen3VLVideoProcessor\) cannot read a clip of 1 frame \(.*temporal_factor.*\), and "
        r"the frames chosen by --num_frames give some clips that few",
        line,
    ), line
    assert not output_file.exists()
    assert main(["predict", "--model_name_or_path", str(family_models("qwen2_vl")), *map(str, flags)]) == 0
