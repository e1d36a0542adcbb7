"""`fiberbench extract-features` on tiny random encoders and synthetic videos: the features are the encoder's, run by
hand on the same frames; the folder resumes, refuses and replaces as its record says; bad inputs are one line."""

import json
import re
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from fiberbench.data import SAMPLE_DIR
from fiberbench.records import clip_id
from transformers import (
    CLIPImageProcessorPil,
    CLIPModel,
    CLIPVisionModel,
    SiglipImageProcessorPil,
    SiglipVisionConfig,
    SiglipVisionModel,
    T5Config,
    T5Model,
    VideoMAEImageProcessorPil,
    VideoMAEModel,
)

from fiberbench.cli import main
from fiberbench.data.features.encoders import EncoderSpec
from fiberbench.videos import ClipVideo, FrameSampling, sample_frames

from ..predict.conftest import write_video, write_video_claiming
from .conftest import clip_level, sample_records

USAGE, DATA = 2, 1
# Three whole videos of the folder: 10 s and 3 s at 2 fps, 7 s at 5 fps.
VIDEOS = {"ten": (10, 2), "three": (3, 2), "seven": (7, 5)}


@pytest.fixture(scope="module")
def video_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    for number, (name, (seconds, fps)) in enumerate(VIDEOS.items()):
        write_video(folder / f"{name}.mp4", seconds=seconds, fps=fps, level=clip_level(number))
    return folder


def extract(*arguments) -> int:
    return main(["extract-features", *map(str, arguments)])


def features_of(folder: Path) -> dict[str, np.ndarray]:
    return {path.stem: np.load(path) for path in sorted(folder.glob("*.npy"))}


def by_hand(encoder: Path, kind: str, frames: list[np.ndarray], pooling: str = "pooler_output") -> np.ndarray:
    """The features of `frames` computed here, with the model classes themselves: (T, D)."""
    with torch.inference_mode():
        if kind == "videomae":
            processor, model = (
                VideoMAEImageProcessorPil.from_pretrained(encoder),
                VideoMAEModel.from_pretrained(encoder),
            )
            window, tubelet = model.config.num_frames, model.config.tubelet_size
            filled = frames + [frames[-1]] * (-len(frames) % window)
            windows = [filled[start : start + window] for start in range(0, len(filled), window)]
            hidden = model(**processor(windows, return_tensors="pt")).last_hidden_state
            steps = hidden.reshape(len(windows), window // tubelet, -1, hidden.shape[-1]).mean(dim=2)
            return steps.reshape(-1, hidden.shape[-1])[: -(-len(frames) // tubelet)].numpy()
        pixels = CLIPImageProcessorPil.from_pretrained(encoder)(images=frames, return_tensors="pt")
        if kind == "clip_dual":
            return CLIPModel.from_pretrained(encoder).get_image_features(**pixels).pooler_output.numpy()
        outputs = CLIPVisionModel.from_pretrained(encoder)(**pixels)
        if pooling == "cls":
            return outputs.last_hidden_state[:, 0].numpy()
        if pooling == "mean":
            return outputs.last_hidden_state.mean(dim=1).numpy()
        return outputs.pooler_output.numpy()


@pytest.mark.parametrize(
    "kind, flags, sampling, size",
    [
        ("clip", [], FrameSampling(fps=1), 48),
        ("clip", ["--pooling", "cls", "--num_frames", 4], FrameSampling(num_frames=4), 48),
        ("clip", ["--pooling", "mean", "--fps", 2, "--max_frames", 9], FrameSampling(fps=2, max_frames=9), 48),
        ("clip_dual", [], FrameSampling(fps=1), 24),
        ("videomae", [], FrameSampling(num_frames=4), 40),  # one window
        ("videomae", ["--fps", 1], FrameSampling(fps=1), 40),  # 3, 7 or 10 frames: windows filled up
    ],
    ids=["clip", "clip-cls-4-frames", "clip-mean-2fps", "clip-dual", "videomae", "videomae-1fps"],
)
def test_features_are_the_encoder_run_by_hand_on_the_same_frames(
    encoders, video_dir, tmp_path, kind, flags, sampling, size
):
    output_dir = tmp_path / "features"
    assert (
        extract("--video_dir", video_dir, "--model_name_or_path", encoders[kind], "--output_dir", output_dir, *flags)
        == 0
    )
    features = features_of(output_dir)
    assert sorted(features) == sorted(VIDEOS)
    pooling = flags[flags.index("--pooling") + 1] if "--pooling" in flags else "pooler_output"
    for name, array in features.items():
        frames = sample_frames(ClipVideo(video_dir / f"{name}.mp4"), sampling).frames
        expected = by_hand(encoders[kind], kind, frames, pooling)
        assert array.dtype == np.float32 and array.shape == (1, len(expected), size), (name, array.shape)
        np.testing.assert_allclose(array[0], expected, rtol=1e-4, atol=1e-5)
    info = json.loads((output_dir / "features.json").read_text())
    assert info["name"] == kind  # the model folder's name
    assert info["feature_size"] == size and info["output"]["pooling"] == ("mean" if kind == "videomae" else pooling)
    assert info["encoder"]["name_or_path"] == str(encoders[kind].resolve())
    assert info["sampling"]["rule"] == sampling.rule()


def test_a_video_encoder_gives_one_feature_per_temporal_patch():
    spec = EncoderSpec("video", "mean", window_frames=16, tubelet_size=2)
    # 40 frames: 3 windows of 16 (the last filled up with 8 repeats), 20 temporal patches kept of 24.
    assert (spec.units(40), spec.steps(40)) == (3, 20)
    assert (spec.units(16), spec.steps(16)) == (1, 8)
    assert (spec.units(7), spec.steps(7)) == (1, 4)
    image = EncoderSpec("image", "pooler_output")
    assert (image.units(10), image.steps(10)) == (10, 10)


def test_a_rerun_encodes_only_what_is_missing_and_leaves_the_rest_untouched(encoders, video_dir, tmp_path, caplog):
    output_dir = tmp_path / "features"
    arguments = ["--video_dir", video_dir, "--model_name_or_path", encoders["clip"], "--output_dir", output_dir]
    assert extract(*arguments) == 0
    (output_dir / "three.npy").unlink()
    before = {path.name: path.stat().st_mtime_ns for path in output_dir.glob("*.npy")}
    first = features_of(output_dir)
    caplog.clear()
    assert extract(*arguments) == 0
    assert "2 of 3 clips already done, 1 to encode" in caplog.text
    assert "encoded 1 clips" in caplog.text
    assert {name: (output_dir / name).stat().st_mtime_ns for name in before} == before
    assert sorted(features_of(output_dir)) == sorted(VIDEOS)
    record = json.loads((output_dir / "fiberbench_output.json").read_text())
    assert record["state"] == "complete" and record["output"]["encoded"] == 1 and record["output"]["already_done"] == 2
    assert set(record["entries"]) == {"features.json", *(f"{name}.npy" for name in VIDEOS)}
    for name, array in first.items():
        np.testing.assert_array_equal(np.load(output_dir / f"{name}.npy"), array)


def test_features_of_another_encoder_are_refused_then_replaced_with_the_flag(encoders, video_dir, tmp_path, cli_error):
    output_dir = tmp_path / "features"
    common = ["--video_dir", video_dir, "--output_dir", output_dir, "--features_name", "video"]
    assert extract(*common, "--model_name_or_path", encoders["clip"]) == 0
    (output_dir / "notes.txt").write_text("mine")  # a user's file beside them stays
    status, line = cli_error("extract-features", *common, "--model_name_or_path", encoders["videomae"])
    assert status == USAGE and "holds features made with other settings (encoder." in line
    assert "--overwrite_output_dir" in line
    assert json.loads((output_dir / "features.json").read_text())["feature_size"] == 48
    assert extract(*common, "--model_name_or_path", encoders["videomae"], "--overwrite_output_dir") == 0
    assert json.loads((output_dir / "features.json").read_text())["feature_size"] == 40
    assert {array.shape[2] for array in features_of(output_dir).values()} == {40}
    assert (output_dir / "notes.txt").read_text() == "mine"


def test_dataset_clips_with_a_whole_video_and_a_missing_one(encoders, tmp_path, cli_error, caplog):
    """--data_dir's test clips: a clip file, a whole video cut to the clip, and a clip without a video."""
    records = sample_records("test")[:3]
    release = tmp_path / "release"
    shutil.copytree(SAMPLE_DIR, release, ignore=shutil.ignore_patterns("i3d"))
    videos = tmp_path / "videos"
    videos.mkdir()
    first, second = records[0], records[1]
    write_video(
        videos / f"{clip_id(first['video_id'], first['video_start_time'], first['video_end_time'])}.mp4",
        seconds=10,
        fps=2,
    )
    write_video(videos / f"{second['video_id']}.mp4", seconds=second["video_end_time"] + 1, fps=1)
    arguments = [
        "--video_dir",
        videos,
        "--model_name_or_path",
        encoders["clip"],
        "--data_dir",
        release,
        "--split",
        "test",
        "--output_dir",
        tmp_path / "features",
    ]
    status, line = cli_error("extract-features", *arguments)
    third = records[2]
    assert status == DATA and f"no video for clip {third['video_id']} ({third['video_start_time']}-" in line
    assert "58 of 60 clips have none" in line and "--skip_missing_videos" in line
    assert not (tmp_path / "features").exists()
    caplog.clear()
    assert extract(*arguments, "--skip_missing_videos") == 0
    assert "58 of 60 clips have no video" in caplog.text
    written = features_of(tmp_path / "features")
    assert sorted(written) == sorted(
        clip_id(r["video_id"], r["video_start_time"], r["video_end_time"]) for r in records[:2]
    )
    assert all(array.shape == (1, 10, 48) for array in written.values())  # 10 s at 1 frame a second
    record = json.loads((tmp_path / "features" / "fiberbench_output.json").read_text())
    assert len(record["output"]["skipped_missing_videos"]) == 58


def write_garbage(path: Path) -> None:
    path.write_bytes(b"not a video at all" * 100)


def write_slow_video(path: Path) -> None:
    """A frame every 20 s: a 10 s clip of it is shorter than one frame."""
    write_video(path, seconds=60, fps=Fraction(1, 20))


def a_siglip(folder: Path) -> Path:
    config = SiglipVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, image_size=32, patch_size=8
    )
    SiglipVisionModel(config).save_pretrained(folder)
    SiglipImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def a_t5(folder: Path) -> Path:
    T5Model(T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    "case, status, message",
    [
        ("no vision tower", USAGE, r"a 't5' model has no vision tower that reads frames"),
        ("no class token", USAGE, r"--pooling cls: .* has no class token"),
        ("cls of a video encoder", USAGE, r"--pooling cls: a video encoder's features are the mean"),
        ("max_frames without fps", USAGE, r"--max_frames caps --fps sampling"),
        ("split without a dataset", USAGE, r"--split chooses splits of --dataset_name or --data_dir"),
        ("a reserved name", USAGE, r"--features_name: 'i3d' is the name of another config"),
        ("not a config name", USAGE, r"--features_name: 'My CLIP' is not a config name"),
        (
            "an unknown split",
            USAGE,
            r"--split dev: --data_dir .* has no such split \(it has: train, validation, test\)",
        ),
        ("undecodable video", DATA, r"garbage.mp4: cannot be decoded .* \(the video of clip garbage\); 1 of 4"),
        ("shorter than one frame", DATA, r"slow.mp4: the clip lasts 10 s \(20-30 s\), less than one frame at 0.05 fps"),
        ("fewer frames than asked", DATA, r"three.mp4: the clip .* has 6 frames, fewer than the 12 asked"),
        (
            "a header claiming more",
            DATA,
            r"lies.mkv: its header says the video lasts 100 s, but its frames end at 3 s: the file is damaged or its "
            r"header is wrong \(the video of clip lies\); 1 of 4",
        ),
        (
            "a whole video ending in its clip",
            DATA,
            r"early.mp4: the clip runs from 20 s to 30 s, but the video ends at 22 s: its last 8 s are not in the file",
        ),
        ("output inside the videos", USAGE, r"--output_dir .* lies inside the input folder"),
        ("not its folder", USAGE, r"--output_dir: .* is not empty and was not written by fiberbench extract-features"),
        ("no videos", DATA, r"--video_dir .*: holds no video \(.mp4, .mkv, .webm\)"),
    ],
)
def test_bad_inputs_are_one_line_before_any_work(case, status, message, encoders, video_dir, tmp_path, cli_error):
    videos, model, output_dir = video_dir, encoders["clip"], tmp_path / "features"
    extra = []
    if case == "no vision tower":
        model = a_t5(tmp_path / "t5")
    elif case == "no class token":
        model, extra = a_siglip(tmp_path / "siglip"), ["--pooling", "cls"]
    elif case == "cls of a video encoder":
        model, extra = encoders["videomae"], ["--pooling", "cls"]
    elif case == "max_frames without fps":
        extra = ["--max_frames", 3]
    elif case == "split without a dataset":
        extra = ["--split", "test"]
    elif case in ("a reserved name", "not a config name"):
        extra = ["--features_name", "i3d" if case == "a reserved name" else "My CLIP"]
    elif case == "an unknown split":
        extra = ["--data_dir", SAMPLE_DIR, "--split", "dev"]
    elif case in ("undecodable video", "a header claiming more"):
        videos = tmp_path / "videos"
        shutil.copytree(video_dir, videos)
        if case == "undecodable video":
            write_garbage(videos / "garbage.mp4")
        else:  # sampled as 100 s before, at 1 frame a second: 97 copies of its last frame
            write_video_claiming(videos / "lies.mkv", seconds=3, fps=2, claimed_seconds=100)
    elif case in ("shorter than one frame", "a whole video ending in its clip"):
        videos = tmp_path / "videos"
        shutil.copytree(video_dir, videos)
        if case == "shorter than one frame":
            video_id = "slow"
            write_slow_video(videos / "slow.mp4")
        else:  # sampled from its 2 s in the clip before
            video_id = "early"
            write_video(videos / "early.mp4", seconds=22, fps=2)
        release = tmp_path / "release"
        release.mkdir()
        record = {**sample_records("test")[0], "video_id": video_id, "video_start_time": 20, "video_end_time": 30}
        for name in ("train.json", "val.json", "test.json"):
            (release / name).write_text(json.dumps([record]))
        extra = ["--data_dir", release, "--split", "test"]
    elif case == "fewer frames than asked":
        extra = ["--num_frames", 12]
    elif case == "output inside the videos":
        output_dir = video_dir / "features"
    elif case == "not its folder":
        shutil.copytree(SAMPLE_DIR / "i3d", output_dir)
    elif case == "no videos":
        videos = tmp_path / "empty"
        videos.mkdir()
    code, line = cli_error(
        "extract-features", "--video_dir", videos, "--model_name_or_path", model, "--output_dir", output_dir, *extra
    )
    assert code == status and re.search(message, line), line
    assert not output_dir.exists() or case == "not its folder"


def test_a_damaged_features_file_is_named_on_resume(encoders, video_dir, tmp_path, cli_error):
    output_dir = tmp_path / "features"
    arguments = ["--video_dir", video_dir, "--model_name_or_path", encoders["clip"], "--output_dir", output_dir]
    assert extract(*arguments) == 0
    np.save(output_dir / "ten.npy", np.zeros((1, 3, 7), dtype=np.float32))
    status, line = cli_error("extract-features", *arguments)
    assert status == DATA and "ten.npy: holds float32 of shape (1, 3, 7), not the float32 (1, T, 48)" in line


def test_the_default_name_is_the_models():
    from fiberbench.data.features.arguments import default_features_name

    assert default_features_name("openai/clip-vit-large-patch14") == "clip-vit-large-patch14"
    assert default_features_name("facebook/dinov2-base") == "dinov2-base"
    assert default_features_name("/models/My_VideoMAE.v2/") == "my_videomae-v2"


def test_a_local_encoder_saved_again_is_other_settings(encoders, video_dir, tmp_path, cli_error):
    encoder = tmp_path / "encoder"
    shutil.copytree(encoders["clip"], encoder)
    arguments = ["--video_dir", video_dir, "--model_name_or_path", encoder, "--output_dir", tmp_path / "features"]
    assert extract(*arguments) == 0
    model = CLIPVisionModel.from_pretrained(encoder)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(2)
    model.save_pretrained(encoder)
    status, line = cli_error("extract-features", *arguments)
    assert status == USAGE and "holds features made with other settings (encoder.files.model.safetensors: " in line


def test_v_jepa_2_is_read_as_a_video_encoder_of_its_windows():
    """Its processor is a video processor, which needs torchvision (not installed here): the model alone."""
    from transformers import VJEPA2Config, VJEPA2Model

    from fiberbench.data.features.encoders import Encoder, encoder_spec

    config = VJEPA2Config(
        crop_size=32,
        patch_size=8,
        frames_per_clip=4,
        tubelet_size=2,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        mlp_ratio=2,
        pred_hidden_size=32,
        pred_num_hidden_layers=1,
        pred_num_attention_heads=4,
    )
    spec = encoder_spec(config, None, "v-jepa-2")
    assert (spec.kind, spec.input_name, spec.window_frames, spec.tubelet_size) == ("video", "pixel_values_videos", 4, 2)
    model = VJEPA2Model(config).eval()
    windows = torch.randn(3, 4, 3, 32, 32)
    features = Encoder(spec, model)({"pixel_values_videos": windows})
    with torch.inference_mode():
        hidden = model(pixel_values_videos=windows, skip_predictor=True).last_hidden_state  # (3, 2 x 16, 32)
    assert features.shape == (3, 2, 32)
    torch.testing.assert_close(features, hidden.reshape(3, 2, 16, 32).mean(dim=2))


def save_family(family: str, folder: Path) -> None:
    """A tiny random DINOv2, SigLIP or SigLIP 2 (whole: a dual encoder) with its PIL/NumPy image processor."""
    from transformers import (
        BitImageProcessorPil,
        Dinov2Config,
        Dinov2Model,
        Siglip2Config,
        Siglip2ImageProcessorPil,
        Siglip2Model,
        SiglipConfig,
        SiglipModel,
    )

    vision = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 64}
    text = {**vision, "vocab_size": 64}
    if family == "dinov2":
        Dinov2Model(Dinov2Config(**vision, image_size=32, patch_size=8)).save_pretrained(folder)
        BitImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    elif family == "siglip":
        SiglipModel(
            SiglipConfig(text_config=text, vision_config={**vision, "image_size": 32, "patch_size": 8})
        ).save_pretrained(folder)
        SiglipImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(folder)
    else:
        config = Siglip2Config(text_config=text, vision_config={**vision, "patch_size": 8, "num_patches": 16})
        Siglip2Model(config).save_pretrained(folder)
        Siglip2ImageProcessorPil(patch_size=8, max_num_patches=16).save_pretrained(folder)


@pytest.mark.parametrize("family", ["dinov2", "siglip", "siglip2"])
def test_dinov2_siglip_and_siglip_2_give_their_pooled_output_per_frame(family, video_dir, tmp_path):
    from transformers import AutoImageProcessor, AutoModel

    save_family(family, tmp_path / family)
    output_dir = tmp_path / "features"
    assert extract("--video_dir", video_dir, "--model_name_or_path", tmp_path / family, "--output_dir", output_dir) == 0
    model, processor = (
        AutoModel.from_pretrained(tmp_path / family),
        AutoImageProcessor.from_pretrained(tmp_path / family),
    )
    frames = sample_frames(ClipVideo(video_dir / "seven.mp4"), FrameSampling(fps=1)).frames
    with torch.inference_mode():
        pixels = processor(images=frames, return_tensors="pt")
        outputs = model(**pixels) if family == "dinov2" else model.get_image_features(**pixels)
    np.testing.assert_allclose(
        np.load(output_dir / "seven.npy")[0], outputs.pooler_output.numpy(), rtol=1e-4, atol=1e-5
    )
