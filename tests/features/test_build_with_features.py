"""`build-dataset --features_dir` takes `extract-features` folders as it takes VaTeX's I3D: a config named after the
features, of their D, with the encoder in the card."""

import json
import re
import shutil

import numpy as np
import pytest
from datasets import Array2D, load_dataset
from fiberbench.data import SAMPLE_DIR
from fiberbench.data.fiber.release import SPLIT_FILES
from fiberbench.records import clip_id
from huggingface_hub import DatasetCard

from fiberbench.cli import main

from ..predict.conftest import write_video
from .conftest import clip_level, sample_records

USAGE, DATA = 2, 1
# A small release: the first records of each split of the sample.
SIZES = {"train": 6, "validation": 4, "test": 4}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """(release folder, videos folder): the small release and a video of each of its clips."""
    root = tmp_path_factory.mktemp("small_release")
    release, videos = root / "release", root / "videos"
    release.mkdir()
    videos.mkdir()
    number = 0
    for split, name in SPLIT_FILES.items():
        records = sample_records(split)[: SIZES[split]]
        (release / name).write_text(json.dumps(records))
        for record in records:
            key = (record["video_id"], record["video_start_time"], record["video_end_time"])
            write_video(videos / f"{clip_id(*key)}.mp4", seconds=10, fps=2, level=clip_level(number))
            number += 1
    return release, videos


@pytest.fixture(scope="module")
def clip_features(release, encoders, tmp_path_factory):
    """The small release's features from the tiny CLIP (D 48), config `clip`."""
    output_dir = tmp_path_factory.mktemp("features") / "clip"
    arguments = ["--video_dir", release[1], "--model_name_or_path", encoders["clip"], "--data_dir", release[0]]
    assert main(["extract-features", *map(str, arguments), "--output_dir", str(output_dir)]) == 0
    return output_dir


def build(*arguments) -> int:
    return main(["build-dataset", *map(str, arguments)])


def test_a_features_folder_is_a_config_of_its_size_with_the_encoder_in_the_card(release, clip_features, tmp_path):
    output_dir = tmp_path / "fiber"
    i3d = tmp_path / "i3d"  # the sample's I3D files of the small release's clips, as VaTeX's folder would hold
    i3d.mkdir()
    for path in clip_features.glob("*.npy"):
        shutil.copy(SAMPLE_DIR / "i3d" / path.name, i3d)
    assert build("--data_dir", release[0], "--features_dir", i3d, clip_features, "--output_dir", output_dir) == 0
    assert {path.name for path in output_dir.iterdir() if path.is_dir()} == {"text", "i3d", "clip"}
    cache = str(tmp_path / "cache")
    clip = load_dataset(str(output_dir), "clip", cache_dir=cache)
    assert clip["test"].features["video_features"] == Array2D(shape=(None, 48), dtype="float32")
    assert load_dataset(str(output_dir), "i3d", cache_dir=cache)["test"].features["video_features"].shape == (
        None,
        1024,
    )
    for row in clip["validation"].with_format("numpy"):
        file = clip_features / f"{clip_id(row['video_id'], row['video_start_time'], row['video_end_time'])}.npy"
        np.testing.assert_array_equal(row["video_features"], np.load(file)[0])
    assert {split: clip[split].num_rows for split in clip} == SIZES

    card = DatasetCard.load(output_dir / "README.md")
    recorded = card.data.to_dict()["fiberbench"]["video_features"]
    assert recorded["clip"] == json.loads((clip_features / "features.json").read_text())
    assert recorded["i3d"]["feature_size"] == 1024 and "encoder" not in recorded["i3d"]
    assert {"config_name": "clip", "data_files": [{"split": s, "path": f"clip/{s}-*.parquet"} for s in SIZES]} in [
        {key: config[key] for key in ("config_name", "data_files")} for config in card.data.to_dict()["configs"]
    ]
    described = re.search(
        r"- `clip`: the same, plus `video_features`, float32 of shape \(T, 48\).*?\n\n", card.text, re.S
    )
    assert described and "pooler_output of forward" in described.group(), card.text
    assert "clip = load_dataset(" in card.text


def damaged_info(features, tmp_path):
    copy = tmp_path / "damaged"
    shutil.copytree(features, copy)
    info = json.loads((copy / "features.json").read_text())
    (copy / "features.json").write_text(json.dumps({**info, "feature_size": "48"}))
    return [copy]


def wrong_size_file(features, tmp_path):
    copy = tmp_path / "wrong"
    shutil.copytree(features, copy)
    name = sorted(copy.glob("*.npy"))[0].name
    np.save(copy / name, np.zeros((1, 3, 1024), dtype=np.float32))
    return [copy]


def same_name_twice(features, tmp_path):
    copy = tmp_path / "again"
    shutil.copytree(features, copy)
    return [features, copy]


@pytest.mark.parametrize(
    "make, status, message",
    [
        (damaged_info, DATA, r"damaged/features.json: field 'feature_size' must be a positive integer, got \"48\""),
        (
            wrong_size_file,
            DATA,
            r"record \d+: field 'video_features': \S+\.npy: expected shape \(1, T, 48\), got \(1, 3, 1024\)",
        ),
        (same_name_twice, USAGE, r"--features_dir .*clip and .*again are both the 'clip' config"),
    ],
    ids=["damaged features.json", "a file of another size", "two folders of one name"],
)
def test_bad_features_folders_are_one_line(make, status, message, release, clip_features, tmp_path, cli_error):
    folders = make(clip_features, tmp_path)
    code, line = cli_error(
        "build-dataset", "--data_dir", release[0], "--features_dir", *folders, "--output_dir", tmp_path / "fiber"
    )
    assert code == status and re.search(message, line), line
    assert not (tmp_path / "fiber").exists()
