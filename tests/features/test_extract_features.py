"""`fiberbench extract-features` on tiny random encoders and synthetic videos: the features are the encoder's, run by
hand on the same frames; the folder resumes, refuses and replaces as its record says; bad inputs are one line. And
`build-dataset --features_dir` takes its folders as it takes VaTeX's I3D: a config of each, of its D, with the encoder
in the card."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Array2D, load_dataset
from huggingface_hub import DatasetCard
from transformers import (CLIPImageProcessorPil, CLIPModel, CLIPVisionModel, SiglipImageProcessorPil, SiglipVisionConfig,
                          SiglipVisionModel, T5Config, T5Model, VideoMAEImageProcessorPil, VideoMAEModel)

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR, SPLIT_FILES
from fiberbench.data.features.arguments import default_features_name
from fiberbench.data.features.encoders import Encoder, EncoderSpec, encoder_spec
from fiberbench.records import clip_id, clip_key
from fiberbench.testing.tiny_videos import read_records, write_video
from fiberbench.videos import ClipVideo, FrameSampling, sample_frames

from ..processes import modules_loaded
from .conftest import clip_level

VIDEOS = {"ten": (10, 2), "three": (3, 2), "seven": (7, 5)}  # whole videos of the folder: seconds, fps


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


def by_hand(encoder: Path, kind: str, frames: list[np.ndarray], pooling: str) -> np.ndarray:
    """The features of `frames` computed here, with the model classes themselves: (T, D)."""
    with torch.inference_mode():
        if kind == "videomae":
            processor, model = VideoMAEImageProcessorPil.from_pretrained(encoder), VideoMAEModel.from_pretrained(encoder)
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
        pooled = {"cls": outputs.last_hidden_state[:, 0], "mean": outputs.last_hidden_state.mean(dim=1)}
        return pooled.get(pooling, outputs.pooler_output).numpy()


@pytest.mark.parametrize(("kind", "flags", "sampling", "size"), [
    ("clip", [], FrameSampling(fps=1), 48),
    ("clip", ["--pooling", "cls", "--num_frames", 4], FrameSampling(num_frames=4), 48),
    ("clip", ["--pooling", "mean", "--fps", 2, "--max_frames", 9], FrameSampling(fps=2, max_frames=9), 48),
    ("clip_dual", [], FrameSampling(fps=1), 24),
    ("videomae", [], FrameSampling(num_frames=4), 40),  # one window
    ("videomae", ["--fps", 1], FrameSampling(fps=1), 40),  # 3, 7 or 10 frames: windows filled up
])
def test_features_are_the_encoder_run_by_hand_on_the_same_frames(encoders, video_dir, tmp_path, kind, flags, sampling, size):
    output_dir = tmp_path / "features"
    assert extract("--video_dir", video_dir, "--model_name_or_path", encoders[kind], "--output_dir", output_dir, *flags) == 0
    features = features_of(output_dir)
    assert sorted(features) == sorted(VIDEOS)
    pooling = flags[flags.index("--pooling") + 1] if "--pooling" in flags else "pooler_output"
    for name, array in features.items():
        frames = sample_frames(ClipVideo(video_dir / f"{name}.mp4"), sampling).frames
        expected = by_hand(encoders[kind], kind, frames, pooling)
        assert array.dtype == np.float32 and array.shape == (1, len(expected), size), (name, array.shape)
        np.testing.assert_allclose(array[0], expected, rtol=1e-4, atol=1e-5)
    info = json.loads((output_dir / "features.json").read_text())
    assert (info["name"], info["feature_size"], info["sampling"]["rule"]) == (kind, size, sampling.rule())
    assert info["output"]["pooling"] == ("mean" if kind == "videomae" else pooling)
    assert info["encoder"]["name_or_path"] == str(encoders[kind].resolve())


def test_a_video_encoder_gives_one_feature_per_temporal_patch_and_v_jepa_2_is_one():
    spec = EncoderSpec("video", "mean", window_frames=16, tubelet_size=2)
    # 40 frames: 3 windows of 16 (the last filled up with 8 repeats), 20 temporal patches kept of 24.
    assert [(spec.units(n), spec.steps(n)) for n in (40, 16, 7)] == [(3, 20), (1, 8), (1, 4)]
    from transformers import VJEPA2Config, VJEPA2Model  # its processor needs torchvision, not installed here

    config = VJEPA2Config(crop_size=32, patch_size=8, frames_per_clip=4, tubelet_size=2, hidden_size=32, num_hidden_layers=1,
                          num_attention_heads=4, mlp_ratio=2, pred_hidden_size=32, pred_num_hidden_layers=1,
                          pred_num_attention_heads=4)
    spec = encoder_spec(config, None, "v-jepa-2")
    assert (spec.kind, spec.input_name, spec.window_frames, spec.tubelet_size) == ("video", "pixel_values_videos", 4, 2)
    model, windows = VJEPA2Model(config).eval(), torch.randn(3, 4, 3, 32, 32)
    with torch.inference_mode():
        hidden = model(pixel_values_videos=windows, skip_predictor=True).last_hidden_state  # (3, 2 x 16, 32)
    torch.testing.assert_close(Encoder(spec, model)({"pixel_values_videos": windows}), hidden.reshape(3, 2, 16, 32).mean(2))
    assert default_features_name("/models/My_VideoMAE.v2/") == "my_videomae-v2"


def test_a_rerun_resumes_and_a_folder_of_other_settings_is_refused_then_replaced(encoders, video_dir, tmp_path, caplog,
                                                                                  cli_error):
    output_dir = tmp_path / "features"
    arguments = ["--video_dir", video_dir, "--output_dir", output_dir, "--features_name", "video"]
    assert extract(*arguments, "--model_name_or_path", encoders["clip"]) == 0
    (output_dir / "three.npy").unlink()
    before = {path.name: path.stat().st_mtime_ns for path in output_dir.glob("*.npy")}
    caplog.clear()
    assert extract(*arguments, "--model_name_or_path", encoders["clip"]) == 0
    assert "2 of 3 clips already done, 1 to encode" in caplog.text and "encoded 1 clips" in caplog.text
    assert {name: (output_dir / name).stat().st_mtime_ns for name in before} == before
    record = json.loads((output_dir / "fiberbench_output.json").read_text())
    assert record["state"] == "complete" and (record["output"]["encoded"], record["output"]["already_done"]) == (1, 2)
    status, line = cli_error("extract-features", *arguments, "--model_name_or_path", encoders["videomae"])
    assert status == 2 and "holds features made with other settings (encoder, output, sampling)" in line
    assert extract(*arguments, "--model_name_or_path", encoders["videomae"], "--overwrite_output_dir") == 0
    assert {array.shape[2] for array in features_of(output_dir).values()} == {40}
    (output_dir / "notes.txt").write_text("mine")  # a user's file there: nothing is replaced
    arguments += ["--model_name_or_path", encoders["clip"], "--overwrite_output_dir"]
    status, line = cli_error("extract-features", *arguments)
    assert status == 2 and "holds notes.txt, which fiberbench extract-features did not write" in line


def test_dataset_clips_with_a_whole_video_and_a_missing_one(encoders, tmp_path, cli_error, caplog):
    """--data_dir's test clips: a clip file, a whole video cut to the clip, and no video for the others."""
    first, second, third = read_records(SAMPLE_DIR, "test")[:3]
    videos = tmp_path / "videos"
    videos.mkdir()
    write_video(videos / f"{clip_id(*clip_key(first))}.mp4", 10, 2)
    write_video(videos / f"{second['video_id']}.mp4", seconds=second["video_end_time"] + 1, fps=1)
    arguments = ["--video_dir", videos, "--model_name_or_path", encoders["clip"], "--data_dir", SAMPLE_DIR, "--split",
                 "test", "--output_dir", tmp_path / "features"]
    status, line = cli_error("extract-features", *arguments)
    assert status == 1 and f"no video for clip {third['video_id']} ({third['video_start_time']}-" in line
    assert "58 of 60 clips have none" in line and "--skip_missing_videos" in line and not (tmp_path / "features").exists()
    assert extract(*arguments, "--skip_missing_videos") == 0
    assert "58 of 60 clips have no video" in caplog.text
    assert sorted(features_of(tmp_path / "features")) == sorted(clip_id(*clip_key(r)) for r in (first, second))
    record = json.loads((tmp_path / "features" / "fiberbench_output.json").read_text())
    assert len(record["output"]["missing_clips"]) == 58


def a_siglip(folder: Path) -> Path:
    config = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                                image_size=32, patch_size=8)
    SiglipVisionModel(config).save_pretrained(folder)
    SiglipImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def a_t5(folder: Path) -> Path:
    T5Model(T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4)).save_pretrained(folder)
    return folder


def video_ending_in_its_clip(folder: Path, encoders, videos: Path) -> dict:
    write_video(videos / "early.mp4", seconds=22, fps=2)
    release = folder / "release"
    release.mkdir()
    record = {**read_records(SAMPLE_DIR, "test")[0], "video_id": "early", "video_start_time": 20, "video_end_time": 30}
    for name in ("train.json", "val.json", "test.json"):
        (release / name).write_text(json.dumps([record]))
    return {"--data_dir": release, "--split": "test"}


# (case, the flags that differ from a good run's, or a function (folder, encoders, videos) setting the case up and
# returning those flags (anything else: none); exit status; what the line says)
BAD_INPUTS = [
    ("no vision tower", lambda d, e, v: {"--model_name_or_path": a_t5(d / "t5")}, 2, r"a 't5' model has no vision tower"),
    ("no class token", lambda d, e, v: {"--model_name_or_path": a_siglip(d / "siglip"), "--pooling": "cls"}, 2,
     r"--pooling cls: .* has no class token"),
    ("cls of a video encoder", lambda d, e, v: {"--model_name_or_path": e["videomae"], "--pooling": "cls"}, 2,
     r"--pooling cls: a video encoder's features are the mean"),
    ("max_frames without fps", {"--max_frames": 3}, 2, r"--max_frames caps --fps sampling"),
    ("split without a dataset", {"--split": "test"}, 2, r"--split chooses splits of --dataset_name"),
    ("a reserved name", {"--features_name": "i3d"}, 2, r"--features_name: 'i3d' is the name of another"),
    ("not a config name", {"--features_name": "My CLIP"}, 2, r"--features_name: 'My CLIP' is not a config"),
    ("an unknown split", {"--data_dir": SAMPLE_DIR, "--split": "dev"}, 2,
     r"--split dev: --data_dir .* has no such split \(it has: train, validation, test\)"),
    ("an undecodable video", lambda d, e, v: (v / "garbage.mp4").write_bytes(b"not a video" * 100), 1,
     r"garbage.mp4: cannot be decoded .* \(the video of clip garbage\); 1 of 4"),
    ("fewer frames than asked", {"--num_frames": 12}, 1, r"three.mp4: the clip .* has 6 frames, fewer than"),
    ("a whole video ending in its clip", video_ending_in_its_clip, 1,
     r"early.mp4: the clip runs from 20 s to 30 s, but the video ends at 22 s"),
    ("not its folder", lambda d, e, v: shutil.copytree(SAMPLE_DIR / "i3d", d / "features"), 2,
     r"features exists and has no record .*, not fiberbench extract-features's"),
    ("no videos", {"--video_dir": SAMPLE_DIR / "i3d"}, 1, r"--video_dir .*: holds no video \(.mp4, .mkv, .webm\)"),
]


@pytest.mark.parametrize(("set_up", "status", "message"), [pytest.param(*c[1:], id=c[0]) for c in BAD_INPUTS])
def test_bad_inputs_are_one_line_before_any_work(encoders, video_dir, tmp_path, cli_error, set_up, status, message):
    videos = tmp_path / "videos"
    shutil.copytree(video_dir, videos)
    flags = {"--video_dir": videos, "--model_name_or_path": encoders["clip"], "--output_dir": tmp_path / "features"}
    changes = set_up(tmp_path, encoders, videos) if callable(set_up) else set_up
    flags |= changes if isinstance(changes, dict) else {}
    code, line = cli_error("extract-features", *[part for pair in flags.items() for part in pair])
    assert code == status and re.search(message, line), line
    assert not (tmp_path / "features" / "features.json").exists()


def test_a_mistyped_folder_is_one_line_before_torch_loads(tmp_path):
    """The CLI runs `fiberbench.data.features.arguments.check` before the command's module loads torch."""
    flags = ["extract-features", "--model_name_or_path", "org/encoder", "--video_dir", str(tmp_path / "nope"),
             "--output_dir", str(tmp_path / "features")]
    loaded, result = modules_loaded(f"from fiberbench.cli import main\nassert main({flags!r}) == 1", ["torch",
                                                                                                      "transformers"])
    assert loaded == [] and not (tmp_path / "features").exists()
    assert result.stderr.strip() == f"fiberbench extract-features: error: --video_dir {tmp_path / 'nope'}: no such folder"


SIZES = {"train": 6, "validation": 4, "test": 4}  # a small release: the first records of each split of the sample


@pytest.fixture(scope="module")
def release(tmp_path_factory, encoders):
    """(release folder, its features from the tiny CLIP, D 48): config `clip`."""
    root = tmp_path_factory.mktemp("small_release")
    (root / "release").mkdir()
    (root / "videos").mkdir()
    for split, name in SPLIT_FILES.items():
        records = read_records(SAMPLE_DIR, split)[: SIZES[split]]
        (root / "release" / name).write_text(json.dumps(records))
        for number, record in enumerate(records):
            write_video(root / "videos" / f"{clip_id(*clip_key(record))}.mp4", seconds=10, fps=2, level=clip_level(number))
    arguments = ["--video_dir", root / "videos", "--model_name_or_path", encoders["clip"], "--data_dir", root / "release"]
    assert main(["extract-features", *map(str, arguments), "--output_dir", str(root / "clip")]) == 0
    return root / "release", root / "clip"


def test_a_features_folder_is_a_config_of_its_size_with_the_encoder_in_the_card(release, tmp_path):
    data_dir, clip = release
    i3d = tmp_path / "i3d"  # the sample's I3D files of the small release's clips, as VaTeX's folder would hold
    i3d.mkdir()
    for path in clip.glob("*.npy"):
        shutil.copy(SAMPLE_DIR / "i3d" / path.name, i3d)
    arguments = ["--data_dir", data_dir, "--features_dir", i3d, clip, "--output_dir", tmp_path / "fiber"]
    assert main(["build-dataset", *map(str, arguments)]) == 0
    assert {path.name for path in (tmp_path / "fiber").iterdir() if path.is_dir()} == {"text", "i3d", "clip"}
    built = load_dataset(str(tmp_path / "fiber"), "clip", cache_dir=str(tmp_path / "cache"))
    assert built["test"].features["video_features"] == Array2D(shape=(None, 48), dtype="float32")
    assert {split: built[split].num_rows for split in built} == SIZES
    for row in built["validation"].with_format("numpy"):
        np.testing.assert_array_equal(row["video_features"], np.load(clip / f"{clip_id(*clip_key(row))}.npy")[0])
    card = DatasetCard.load(tmp_path / "fiber" / "README.md")
    recorded = card.data.to_dict()["fiberbench"]["video_features"]
    assert recorded["clip"] == json.loads((clip / "features.json").read_text())
    assert recorded["i3d"]["feature_size"] == 1024 and "encoder" not in recorded["i3d"]
    described = re.search(r"- `clip`: the same, plus `video_features`, float32 of shape \(T, 48\).*?\n\n", card.text, re.S)
    assert described and "pooler_output of forward" in described.group() and "clip = load_dataset(" in card.text


def test_bad_features_folders_are_one_line(release, tmp_path, cli_error):
    data_dir, clip = release
    for name in ("damaged", "again"):
        shutil.copytree(clip, tmp_path / name)
    info = json.loads((clip / "features.json").read_text())
    (tmp_path / "damaged" / "features.json").write_text(json.dumps({**info, "feature_size": "48"}))
    for folders, status, message in [
        ([tmp_path / "damaged"], 1, r"damaged/features.json: field 'feature_size' must be a positive integer, got \"48\""),
        ([clip, tmp_path / "again"], 2, r"--features_dir .*clip and .*again are both the 'clip' config"),
    ]:
        arguments = ["--data_dir", data_dir, "--features_dir", *folders, "--output_dir", tmp_path / "f"]
        code, line = cli_error("build-dataset", *arguments)
        assert code == status and re.search(message, line), line
        assert not (tmp_path / "f").exists()
