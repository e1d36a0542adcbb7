"""From videos to a trained FIBER model on other features than I3D: docs/your-own-features.md's chain (a tiny CLIP on
the sample's synthetic videos: extract-features -> build-dataset --features_dir -> training -> predict), run once by its
walk (tests/readme_walks.py, which the README test checks ran): here what it made is checked."""

import json

import pytest
from datasets import load_dataset

from ..readme_walks import DOCS, block_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def features_page(tmp_path_factory):
    """The walk's repository after the page's chain ran, and the chain's finished block: once per test run."""
    return block_run(tmp_path_factory, DOCS / "your-own-features.md", "outputs/tiny_clip")


def test_a_model_trains_on_the_features_of_another_encoder(features_page, tmp_path):
    repository, result = features_page
    dataset = load_dataset(str(repository / "outputs/my_fiber"), "tiny-clip", split="test", cache_dir=str(tmp_path))
    assert dataset.features["video_features"].shape == (None, 48) and dataset.num_rows == 60
    info = json.loads((repository / "outputs/features/tiny-clip/features.json").read_text())
    assert (info["name"], info["feature_size"], info["sampling"]["fps"]) == ("tiny-clip", 48, 1.0)
    config = json.loads((repository / "outputs/tiny_clip/model/config.json").read_text())
    assert (config["video_feature_size"], config["video_features_name"]) == (48, "tiny-clip")
    assert (repository / "outputs/tiny_clip.jsonl").read_text().count("\n") == 60
