"""`build-dataset --features_dir` takes `extract-features` folders as it takes VaTeX's I3D: a config of each folder, of
its D, with the encoder in the card; damaged folders are one line."""

import json
import re
import shutil

import numpy as np
import pytest
from datasets import Array2D, load_dataset
from huggingface_hub import DatasetCard

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR, SPLIT_FILES
from fiberbench.records import clip_id
from fiberbench.testing.tiny_videos import sample_records, write_video

from .conftest import clip_level

SIZES = {"train": 6, "validation": 4, "test": 4}  # a small release: the first records of each split of the sample


@pytest.fixture(scope="module")
def release(tmp_path_factory, encoders):
    """(release folder, its features from the tiny CLIP, D 48): config `clip`."""
    root = tmp_path_factory.mktemp("small_release")
    (root / "release").mkdir()
    (root / "videos").mkdir()
    for split, name in SPLIT_FILES.items():
        records = sample_records(split)[: SIZES[split]]
        (root / "release" / name).write_text(json.dumps(records))
        for number, record in enumerate(records):
            key = (record["video_id"], record["video_start_time"], record["video_end_time"])
            write_video(root / "videos" / f"{clip_id(*key)}.mp4", seconds=10, fps=2, level=clip_level(number))
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
        file = clip / f"{clip_id(row['video_id'], row['video_start_time'], row['video_end_time'])}.npy"
        np.testing.assert_array_equal(row["video_features"], np.load(file)[0])
    card = DatasetCard.load(tmp_path / "fiber" / "README.md")
    recorded = card.data.to_dict()["fiberbench"]["video_features"]
    assert recorded["clip"] == json.loads((clip / "features.json").read_text())
    assert recorded["i3d"]["feature_size"] == 1024 and "encoder" not in recorded["i3d"]
    described = re.search(r"- `clip`: the same, plus `video_features`, float32 of shape \(T, 48\).*?\n\n", card.text, re.S)
    assert described and "pooler_output of forward" in described.group() and "clip = load_dataset(" in card.text


def damaged_info(clip, tmp_path):
    shutil.copytree(clip, tmp_path / "damaged")
    info = json.loads((tmp_path / "damaged" / "features.json").read_text())
    (tmp_path / "damaged" / "features.json").write_text(json.dumps({**info, "feature_size": "48"}))
    return [tmp_path / "damaged"]


def same_name_twice(clip, tmp_path):
    shutil.copytree(clip, tmp_path / "again")
    return [clip, tmp_path / "again"]


@pytest.mark.parametrize(
    ("make", "status", "message"),
    [
        (damaged_info, 1, r"damaged/features.json: field 'feature_size' must be a positive integer, got \"48\""),
        (same_name_twice, 2, r"--features_dir .*clip and .*again are both the 'clip' config"),
    ],
    ids=["damaged features.json", "two folders of one name"],
)
def test_bad_features_folders_are_one_line(make, status, message, release, tmp_path, cli_error):
    folders = make(release[1], tmp_path)
    code, line = cli_error("build-dataset", "--data_dir", release[0], "--features_dir", *folders, "--output_dir", tmp_path / "f")
    assert code == status and re.search(message, line), line
    assert not (tmp_path / "f").exists()
