"""The bundled synthetic sample: committed as generated, in the release format, and built as designed."""

import io
import json
import logging
import re
import subprocess
import sys
import tarfile
from collections import Counter, defaultdict

import numpy as np
import pytest

from fiberbench.data import SAMPLE_DIR, load_sample
from fiberbench.data.fiber.make_sample import CLIPS_PER_SPLIT, ITEMS, make_sample
from fiberbench.records import feature_file_name, load_video_features, validate_record

SPLITS = {"train": "train.json", "validation": "val.json", "test": "test.json"}


def read_split(name):
    return json.loads((SAMPLE_DIR / name).read_text())


def test_committed_sample_is_what_make_sample_writes(tmp_path):
    fresh = tmp_path / "sample"
    make_sample(fresh)
    written = sorted(path.relative_to(fresh) for path in fresh.rglob("*") if path.is_file())
    committed = sorted(path.relative_to(SAMPLE_DIR) for path in SAMPLE_DIR.rglob("*") if path.is_file())
    assert written == committed
    for relative in written:
        assert (fresh / relative).read_bytes() == (SAMPLE_DIR / relative).read_bytes(), relative


@pytest.mark.slow
def test_make_sample_names_the_encoding_of_every_text_file(tmp_path):
    """Text written without an encoding follows the locale (ASCII under LANG=C): Python's EncodingWarning finds it."""
    script = (
        "import sys, warnings\n"
        "warnings.filterwarnings('error', category=EncodingWarning, module='fiberbench.data.fiber.make_sample')\n"
        "from fiberbench.data.fiber.make_sample import make_sample\n"
        "make_sample(sys.argv[1])\n"
    )
    command = [sys.executable, "-X", "warn_default_encoding", "-c", script, str(tmp_path / "sample")]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "sample" / "README.md").is_file()


def test_sample_is_small_and_says_synthetic():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(SAMPLE_DIR, arcname="sample")
    assert buffer.tell() < 3_000_000
    assert "SYNTHETIC" in (SAMPLE_DIR / "README.md").read_text()


def test_sample_records_are_valid_release_records_with_features():
    video_ids = set()
    for split, name in SPLITS.items():
        records = read_split(name)
        assert len(records) == CLIPS_PER_SPLIT[name.removesuffix(".json")]
        for index, record in enumerate(records):
            example = validate_record(record, file=name, index=index)
            assert re.fullmatch(r"[A-Za-z0-9_-]{11}", example["video_id"])
            assert example["video_end_time"] == example["video_start_time"] + 10
            path = SAMPLE_DIR / "i3d" / feature_file_name(
                example["video_id"], example["video_start_time"], example["video_end_time"]
            )
            features = load_video_features(path, file=name, index=index)
            assert 16 <= features.shape[0] <= 40
            if split == "train":
                assert example["additional_answers"] == []
            else:
                assert 3 <= len(example["additional_answers"]) <= 5
                assert all(1 <= len(answers) <= 3 for answers in example["additional_answers"])
            video_ids.add(example["video_id"])
    assert any("_" in video_id for video_id in video_ids) and any("-" in video_id for video_id in video_ids)
    assert len(video_ids) == sum(CLIPS_PER_SPLIT.values())


def test_text_does_not_tell_the_item():
    """Each masked caption recurs with many items, and no item dominates the train labels."""
    items_per_caption = defaultdict(list)
    for record in read_split("train.json"):
        items_per_caption[record["masked_caption"]].append(record["label"].lower())
    frequent = [items for items in items_per_caption.values() if len(items) >= 10]
    assert len(frequent) >= 3
    assert all(len(set(items)) >= min(len(items), len(ITEMS)) * 0.6 for items in frequent)
    labels = Counter(label for items in items_per_caption.values() for label in items)
    assert labels.most_common(1)[0][1] / labels.total() < 2.5 / len(ITEMS)


def test_features_tell_the_item():
    """A nearest-centroid classifier on mean-pooled features recovers the item on test."""

    def mean_features(name):
        pooled, labels = [], []
        for record in read_split(name):
            file_name = feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])
            pooled.append(np.load(SAMPLE_DIR / "i3d" / file_name)[0].mean(axis=0))
            labels.append(record["label"].lower())
        return np.stack(pooled), labels

    train_features, train_labels = mean_features("train.json")
    test_features, test_labels = mean_features("test.json")
    names = sorted(set(train_labels))
    centroids = np.stack([train_features[[label == name for label in train_labels]].mean(0) for name in names])
    distances = ((test_features[:, None] - centroids[None]) ** 2).sum(-1)
    predicted = [names[index] for index in distances.argmin(1)]
    assert np.mean([p == t for p, t in zip(predicted, test_labels)]) >= 0.9


@pytest.mark.parametrize("config_name", ["text", "i3d"])
def test_load_sample(config_name, tmp_path, monkeypatch, caplog):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path)
    with caplog.at_level(logging.WARNING):
        sample = load_sample(config_name)
    assert "Loading the bundled SYNTHETIC sample" in caplog.text
    assert {split: sample[split].num_rows for split in sample} == {"train": 400, "validation": 60, "test": 60}
    assert ("video_features" in sample["train"].features) == (config_name == "i3d")
    # Built once, keyed by content: a second call reuses the folder.
    assert len(list((tmp_path / "fiberbench").iterdir())) == 1
    load_sample(config_name)
    assert len(list((tmp_path / "fiberbench").iterdir())) == 1


@pytest.mark.slow
def test_two_first_runs_at_once_build_the_sample_once(tmp_path):
    """Two `fiberbench evaluate` runs started together on an empty cache: one builds the sample, the other waits for
    that build and uses it (it used to fail, naming the cache folder as an --output_dir it was never given)."""
    import os

    from fiberbench.files import write_jsonl
    from fiberbench.records import KEY_FIELDS

    rows = [{field: record[field] for field in KEY_FIELDS} | {"prediction": "a man"} for record in read_split("test.json")]
    write_jsonl(tmp_path / "predictions.jsonl", rows)
    environment = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "fiberbench.cli", "evaluate", "predictions.jsonl", "--num_bootstrap", "10"]
    runs = [
        subprocess.Popen(
            [*command, "--output_dir", f"run{number}"], cwd=tmp_path, env=environment, stderr=subprocess.PIPE, text=True
        )
        for number in (1, 2)
    ]
    outputs = [run.communicate(timeout=600)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert all((tmp_path / f"run{number}" / "results.json").is_file() for number in (1, 2))
    assert sum(output.count("Building the bundled sample into") for output in outputs) == 1, outputs
