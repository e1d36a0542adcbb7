"""`fiberbench build-dataset`: the folder loads with `load_dataset`, its card matches the data, its output guarantees."""

import json
import logging
import shutil
from collections import Counter

import numpy as np
import pytest
import yaml
from datasets import Array2D, List, Value, load_dataset
from huggingface_hub import DatasetCard

import fiberbench.data.build as build_module
from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR, SPLIT_FILES, is_synthetic
from fiberbench.data.build import build_dataset
from fiberbench.errors import UsageError
from fiberbench.records import clip_key, feature_file_name

from .conftest import snapshot

TEXT_FEATURES = {"video_id": Value("string"), "video_start_time": Value("int32"), "video_end_time": Value("int32")}
TEXT_FEATURES |= {name: Value("string") for name in ("caption", "masked_caption", "label")}
TEXT_FEATURES |= {"additional_answers": List(List(Value("string"))), "category": Value("string")}
RECORDS = {split: json.loads((SAMPLE_DIR / name).read_text()) for split, name in SPLIT_FILES.items()}
CATEGORIES = {split: dict(line.split("\t") for line in (SAMPLE_DIR / f"categories_{split}.tsv").read_text().splitlines()[1:])
              for split in ("val", "test")}


def test_the_folder_holds_the_configs_card_and_record(built_sample):
    files = sorted(str(path.relative_to(built_sample)) for path in built_sample.rglob("*") if path.is_file())
    record = json.loads((built_sample / "fiberbench_output.json").read_text())
    assert record["written_by"] == "fiberbench build-dataset" and record["state"] == "complete"
    assert sorted(record["files"]) == [file for file in files if file != "fiberbench_output.json"]
    assert "README.md" in files and {file.split("/")[0] for file in files if "/" in file} == {"text", "i3d"}
    assert sum(file.startswith("i3d/train-") for file in files) > 1  # --max_shard_size 5MB: ~46 MB in shards
    assert not [path for path in built_sample.parent.iterdir() if path.name.startswith(".fiber.tmp")]


def test_every_record_loads_back_with_its_category_and_features(built_sample, tmp_path):
    text = load_dataset(str(built_sample), cache_dir=str(tmp_path))
    i3d = load_dataset(str(built_sample), "i3d", cache_dir=str(tmp_path)).with_format("numpy")
    categories = {**CATEGORIES["val"], **CATEGORIES["test"]}
    for split, records in RECORDS.items():
        assert text[split].features == TEXT_FEATURES
        assert i3d[split].features == {**TEXT_FEATURES, "video_features": Array2D(shape=(None, 1024), dtype="float32")}
        assert text[split].to_list() == [{**record, "category": categories.get(record["video_id"])} for record in records]
        for index in (0, len(records) - 1):
            expected = np.load(SAMPLE_DIR / "i3d" / feature_file_name(*clip_key(records[index])))[0]
            np.testing.assert_array_equal(i3d[split][index]["video_features"], expected)


def test_the_card_matches_the_data_and_says_synthetic(built_sample):
    text = (built_sample / "README.md").read_text()
    header, card = yaml.safe_load(text.split("---")[1]), DatasetCard.load(built_sample / "README.md")
    assert header["pretty_name"] == "FIBER (SYNTHETIC sample)" and "> **SYNTHETIC DATA.**" in card.text
    assert header["fiberbench"]["synthetic"] is True and is_synthetic(str(built_sample)) and is_synthetic(None)
    configs = {config["config_name"]: config for config in header["configs"]}
    assert configs["text"]["default"] is True and "default" not in configs["i3d"]
    assert configs["i3d"]["data_files"][0] == {"split": "train", "path": "i3d/train-*.parquet"}
    for info in header["dataset_info"]:
        assert {split["name"]: split["num_examples"] for split in info["splits"]} == {s: len(r) for s, r in RECORDS.items()}
        parquet_bytes = sum(path.stat().st_size for path in (built_sample / info["config_name"]).glob("*.parquet"))
        assert info["download_size"] == parquet_bytes
    validation = RECORDS["validation"]
    annotators = sum(len(record["additional_answers"]) for record in validation) / 60
    answers = sum(len(group) for record in validation for group in record["additional_answers"]) / 60
    assert f"| validation | 60 | {annotators:.2f} | {answers:.2f} |" in card.text
    assert "| `i3d` | 400 | 60 | 60 |" in card.text
    val, test = Counter(CATEGORIES["val"].values()), Counter(CATEGORIES["test"].values())
    assert all(f"| {name} | {val[name]} | {test[name]} |" in card.text for name in ("Person", "Passive entity", "Location"))
    assert "No record was skipped." in card.text


def test_a_copy_of_the_sample_is_synthetic_and_other_data_is_not(tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(SAMPLE_DIR, data_dir, ignore=shutil.ignore_patterns("i3d"))
    build_dataset(data_dir, tmp_path / "copy")
    assert is_synthetic(str(tmp_path / "copy"))
    assert "a copy of the bundled SYNTHETIC sample" in (tmp_path / "copy" / "README.md").read_text()
    (data_dir / "train.json").write_text(json.dumps(RECORDS["train"][:-1]))
    build_dataset(data_dir, tmp_path / "other")
    assert not is_synthetic(str(tmp_path / "other")) and "SYNTHETIC" not in (tmp_path / "other" / "README.md").read_text()


def test_an_output_is_replaced_only_with_the_flag(tmp_path, release_dir):
    build_dataset(release_dir, tmp_path / "fiber")
    with pytest.raises(UsageError, match="pass --overwrite_output_dir to replace it"):
        build_dataset(SAMPLE_DIR, tmp_path / "fiber")
    builders = build_dataset(SAMPLE_DIR, tmp_path / "fiber", overwrite=True)
    splits = builders["text"].info.splits
    assert {split: info.num_examples for split, info in splits.items()} == {"train": 400, "validation": 60, "test": 60}


def test_a_failed_build_leaves_nothing(tmp_path, monkeypatch):
    """Every Parquet file is written, then the card fails: no folder, not even a hidden one, remains."""
    monkeypatch.setattr(build_module, "make_dataset_card", lambda *args, **kwargs: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        build_dataset(SAMPLE_DIR, tmp_path / "fiber")
    assert [path.name for path in tmp_path.iterdir()] == [".fiber.lock"]


def test_a_full_disk_is_one_line_naming_the_output_and_keeps_the_previous_build(make_small_disk, release_dir, cli_error):
    disk = make_small_disk("320k")  # the small release's text config fits in it, the sample's i3d config does not
    output_dir = disk / "fiber"
    assert main(["build-dataset", "--data_dir", str(release_dir), "--output_dir", str(output_dir)]) == 0
    previous = snapshot(disk)
    status, line = cli_error("build-dataset", "--output_dir", output_dir, "--overwrite_output_dir")
    assert status == 1 and line.endswith(f"error: {output_dir}: No space left on device"), line
    assert snapshot(disk) == previous  # the previous build, whole


def test_answers_that_normalize_to_nothing_are_dropped_and_counted(release_dir, tmp_path, caplog):
    records = json.loads((release_dir / "test.json").read_text())
    records[0]["additional_answers"] = [["-"], ["the", records[0]["label"]], ["A !"]]
    records[1]["additional_answers"][0] = ["..."] + records[1]["additional_answers"][0]
    (release_dir / "test.json").write_text(json.dumps(records))
    with caplog.at_level(logging.INFO):
        assert main(["build-dataset", "--data_dir", str(release_dir), "--output_dir", str(tmp_path / "fiber")]) == 0
    dropped = "4 answers that normalize to nothing (test 4), and 2 annotators left without one"
    assert f"text: dropped {dropped}" in caplog.text and dropped in (tmp_path / "fiber" / "README.md").read_text()
    test = load_dataset(str(tmp_path / "fiber"), split="test", cache_dir=str(tmp_path / "cache"))
    assert test[0]["additional_answers"] == [[records[0]["label"]]]
    assert test[1]["additional_answers"][0] == records[1]["additional_answers"][0][1:]


def test_the_release_offline_and_a_bad_repo_id_are_one_line(tmp_path, monkeypatch, cli_error):
    monkeypatch.setattr("datasets.config.HF_DATASETS_OFFLINE", True)
    status, line = cli_error("build-dataset", "--release", "--output_dir", tmp_path / "fiber")
    assert status == 1 and "Could not get the data files" in line
    status, line = cli_error("build-dataset", "--output_dir", tmp_path / "f", "--push_to_hub", "not a/valid/repo")
    assert status == 2 and "Invalid Hub repo id 'not a/valid/repo'" in line
    assert not any((tmp_path / name).exists() for name in ("fiber", "f"))
