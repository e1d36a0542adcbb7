"""`fiberbench build-dataset`: the built folder loads with `load_dataset`, its card matches the data."""

import json
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import yaml
from datasets import Array2D, List, Value, load_dataset
from huggingface_hub import DatasetCard

import fiberbench.data.fiber.card as card_module
from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR
from fiberbench.data.build import Sources, build_dataset
from fiberbench.records import feature_file_name
from fiberbench.errors import UsageError
from fiberbench.ownership import FOLDER_RECORD

from ..processes import modules_loaded

SPLIT_FILES = {"train": "train.json", "validation": "val.json", "test": "test.json"}
TEXT_FEATURES = {
    "video_id": Value("string"),
    "video_start_time": Value("int32"),
    "video_end_time": Value("int32"),
    "caption": Value("string"),
    "masked_caption": Value("string"),
    "label": Value("string"),
    "additional_answers": List(List(Value("string"))),
    "category": Value("string"),
}


def sample_records():
    return {split: json.loads((SAMPLE_DIR / name).read_text()) for split, name in SPLIT_FILES.items()}


def read_categories(name):
    rows = [line.split("\t") for line in (SAMPLE_DIR / name).read_text().splitlines()[1:]]
    return dict(rows)


def sample_categories():
    return {**read_categories("categories_val.tsv"), **read_categories("categories_test.tsv")}


def test_layout(built_sample):
    files = sorted(str(path.relative_to(built_sample)) for path in built_sample.rglob("*") if path.is_file())
    assert files[:2] == ["README.md", FOLDER_RECORD]
    assert {file.split("/")[0] for file in files[2:]} == {"text", "i3d"}
    record = json.loads((built_sample / FOLDER_RECORD).read_text())
    assert record["written_by"] == "fiberbench build-dataset" and record["state"] == "complete"
    assert set(record["entries"]) == {"README.md", "text", "i3d"}
    # --max_shard_size 5MB: the i3d train split (~46 MB before compression) is written in shards.
    assert sum(file.startswith("i3d/train-") for file in files) > 1
    assert "text/train-00000-of-00001.parquet" in files
    assert not list(built_sample.parent.glob(".*"))


def test_text_config_loads_back(built_sample, tmp_path):
    dataset = load_dataset(str(built_sample), cache_dir=str(tmp_path))
    records, categories = sample_records(), sample_categories()
    assert set(dataset) == set(SPLIT_FILES)
    for split, split_records in records.items():
        assert dataset[split].features == TEXT_FEATURES
        assert dataset[split].num_rows == len(split_records)
        for row, record in zip(dataset[split], split_records):
            assert row == {**record, "category": categories.get(record["video_id"])}
    assert all(row["additional_answers"] == [] and row["category"] is None for row in dataset["train"])


def test_default_config_by_name_from_the_parent_folder(built_sample, tmp_path, monkeypatch):
    monkeypatch.chdir(built_sample.parent)
    dataset = load_dataset("fiber", split="validation", cache_dir=str(tmp_path))
    assert dataset.num_rows == 60 and "video_features" not in dataset.features
    assert load_dataset("fiber", "i3d", split="test", cache_dir=str(tmp_path)).num_rows == 60


def test_i3d_config_loads_back_with_features(built_sample, tmp_path):
    dataset = load_dataset(str(built_sample), "i3d", cache_dir=str(tmp_path))
    records = sample_records()
    for split, split_records in records.items():
        assert dataset[split].features == {
            **TEXT_FEATURES,
            "video_features": Array2D(shape=(None, 1024), dtype="float32"),
        }
        assert dataset[split].num_rows == len(split_records)
    test = dataset["test"].with_format("numpy")
    for index in (0, 59):
        record = records["test"][index]
        file_name = feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])
        expected = np.load(SAMPLE_DIR / "i3d" / file_name)[0]
        features = test[index]["video_features"]
        assert features.dtype == np.float32
        np.testing.assert_array_equal(features, expected)


def test_card_yaml_is_valid_and_matches_the_data(built_sample):
    text = (built_sample / "README.md").read_text()
    header = yaml.safe_load(text.split("---")[1])
    card = DatasetCard.load(built_sample / "README.md")
    assert card.data.pretty_name == header["pretty_name"] == "FIBER (SYNTHETIC sample)"
    assert "SYNTHETIC" in card.text
    configs = {config["config_name"]: config for config in header["configs"]}
    assert configs["text"]["default"] is True and "default" not in configs["i3d"]
    assert configs["i3d"]["data_files"][0] == {"split": "train", "path": "i3d/train-*.parquet"}

    records = sample_records()
    for info in header["dataset_info"]:
        sizes = {split["name"]: split["num_examples"] for split in info["splits"]}
        assert sizes == {split: len(split_records) for split, split_records in records.items()}
        parquet_bytes = sum(path.stat().st_size for path in (built_sample / info["config_name"]).glob("*.parquet"))
        assert info["download_size"] == parquet_bytes
    i3d_features = next(info["features"] for info in header["dataset_info"] if info["config_name"] == "i3d")
    array2d = {"array2_d": {"shape": [None, 1024], "dtype": "float32"}}
    assert {"name": "video_features", "dtype": array2d} in i3d_features

    validation = records["validation"]
    annotators = sum(len(record["additional_answers"]) for record in validation) / len(validation)
    answers = sum(len(group) for record in validation for group in record["additional_answers"]) / len(validation)
    assert f"| validation | 60 | {annotators:.2f} | {answers:.2f} |" in card.text
    assert "| `i3d` | 400 | 60 | 60 |" in card.text
    validation_categories = Counter(read_categories("categories_val.tsv").values())
    test_categories = Counter(read_categories("categories_test.tsv").values())
    for category in ("Person", "Passive entity", "Location"):
        assert f"| {category} | {validation_categories[category]} | {test_categories[category]} |" in card.text
    assert "No record was skipped." in card.text


def test_refuses_to_overwrite_unless_asked(tmp_path):
    output_dir = tmp_path / "fiber"
    build_dataset(Sources.from_location(SAMPLE_DIR), output_dir)
    with pytest.raises(UsageError, match="pass --overwrite_output_dir to replace it"):
        build_dataset(Sources.from_location(SAMPLE_DIR), output_dir)

    result = build_dataset(Sources.from_location(SAMPLE_DIR), output_dir, overwrite=True)
    assert sorted(path.name for path in output_dir.iterdir()) == ["README.md", FOLDER_RECORD, "text"]
    assert result.num_examples == {"text": {"train": 400, "validation": 60, "test": 60}}
    assert [path.name for path in tmp_path.iterdir()] == ["fiber"]


def test_overwrite_replaces_only_a_folder_that_build_dataset_wrote(tmp_path, cli_error):
    output_dir = tmp_path / "fiber"
    output_dir.mkdir()
    (output_dir / "keep.txt").write_text("mine")
    status, line = cli_error("build-dataset", "--output_dir", output_dir, "--overwrite_output_dir")
    assert status == 2 and "was not written by fiberbench build-dataset" in line
    assert [path.name for path in output_dir.iterdir()] == ["keep.txt"]


def test_overwrite_never_deletes_its_own_data_dir(tmp_path, cli_error):
    # The reproduction of the data-loss report: the input folder, with the user's notes, given as the output.
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    for path in SAMPLE_DIR.glob("*.json"):
        shutil.copy(path, data_dir)
    (data_dir / "NOTES.txt").write_text("keep")
    before = sorted(path.name for path in data_dir.iterdir())
    status, line = cli_error("build-dataset", "--data_dir", data_dir, "--output_dir", data_dir, "--overwrite_output_dir")
    assert status == 2 and ("is an input" in line or "holds the input" in line), line
    assert sorted(path.name for path in data_dir.iterdir()) == before


@pytest.mark.parametrize("where", ["current directory", "parent of the current directory", "home directory"])
def test_overwrite_never_touches_the_current_or_home_directory(tmp_path, monkeypatch, cli_error, where):
    work = tmp_path / "home" / "work"
    work.mkdir(parents=True)
    (work / "thesis.tex").write_text("keep")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    output_dir = {"current directory": ".", "parent of the current directory": "..", "home directory": "~"}[where]
    output_dir = tmp_path / "home" if output_dir == "~" else output_dir
    status, line = cli_error("build-dataset", "--output_dir", output_dir, "--overwrite_output_dir")
    assert status == 2 and "directory or a folder above it" in line
    assert (work / "thesis.tex").read_text() == "keep"


def test_a_crash_before_the_end_leaves_nothing(tmp_path, monkeypatch):
    """Every Parquet file is written, then the card fails: no folder, not even a hidden one, remains."""

    def failing_card(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(card_module, "make_dataset_card", failing_card)
    with pytest.raises(RuntimeError, match="disk full"):
        build_dataset(Sources.sample(), tmp_path / "fiber")
    assert list(tmp_path.iterdir()) == []


def test_push_to_hub_with_an_invalid_repo_id_fails_before_building(tmp_path, cli_error):
    # The real push round trip runs against a local Hub server in tests/hub/.
    output_dir = tmp_path / "fiber"
    status, line = cli_error("build-dataset", "--output_dir", output_dir, "--push_to_hub", "not a/valid/repo")
    assert status == 2 and "Invalid Hub repo id 'not a/valid/repo'" in line
    assert not output_dir.exists()


def test_release_urls_are_the_online_default():
    sources = Sources.release()
    assert sorted(sources.split_files) == ["test", "train", "validation"]
    assert all(url.startswith("https://www.dropbox.com/") for url in sources.split_files.values())
    assert sorted(sources.category_files) == ["test", "validation"]
    assert not sources.synthetic and Sources.sample().synthetic


def test_missing_release_files_are_reported(tmp_path):
    (tmp_path / "train.json").write_text("[]")
    assert main(["build-dataset", "--data_dir", str(tmp_path), "--output_dir", str(tmp_path / "out")]) == 1
    with pytest.raises(FileNotFoundError, match="val.json, test.json"):
        Sources.from_location(tmp_path)


def test_cli_help():
    result = subprocess.run(
        [sys.executable, "-m", "fiberbench.cli", "build-dataset", "--help"], capture_output=True, text=True, check=True
    )
    for flag in ("--data_dir", "--release", "--features_dir", "--output_dir", "--skip_invalid", "--push_to_hub"):
        assert flag in result.stdout


def test_a_build_of_release_files_loads_neither_torch_nor_transformers(tmp_path):
    """The data tools read the release's blank from `fiberbench.data` (not from the model's processor, whose package
    loads torch and transformers): a build of the sample took 4.5 s for them, 1.1 s without."""
    code = (
        "from fiberbench.cli import main\n"
        f"assert main(['build-dataset', '--output_dir', {str(tmp_path / 'fiber')!r}]) == 0\n"
    )
    assert modules_loaded(code, ["spacy", "torch", "transformers"])[0] == []
    assert {path.name for path in (tmp_path / "fiber").iterdir() if path.is_dir()} == {"text", "i3d"}


def test_the_data_tools_and_the_model_read_one_blank():
    from fiberbench.records import BLANK
    from fiberbench.modeling.processing_fiber import BLANK as MODEL_BLANK

    assert BLANK == MODEL_BLANK == "_____"


def test_answers_that_normalize_to_nothing_are_dropped_and_counted(release_dir, tmp_path, caplog):
    # "-" and "the" are no answers: kept, an empty prediction (a clip predict skipped for its missing
    # video) would match them, EM 100. Dropped, it scores 0 on every blank, as the README says.
    import logging

    records = json.loads((release_dir / "test.json").read_text())
    records[0]["additional_answers"] = [["-"], ["the", records[0]["label"]], ["A !"]]
    records[1]["additional_answers"][0] = ["..."] + records[1]["additional_answers"][0]
    (release_dir / "test.json").write_text(json.dumps(records))
    output_dir = tmp_path / "fiber"
    with caplog.at_level(logging.INFO):
        assert main(["build-dataset", "--data_dir", str(release_dir), "--output_dir", str(output_dir)]) == 0
    assert "text: dropped 4 answers that normalize to nothing (test 4), and 2 annotators left without one" in caplog.text
    test = load_dataset(str(output_dir), split="test", cache_dir=str(tmp_path / "cache"))
    assert test[0]["additional_answers"] == [[records[0]["label"]]]
    assert test[1]["additional_answers"][0] == records[1]["additional_answers"][0][1:]
    card = (output_dir / "README.md").read_text()
    assert "4 answers that normalize to nothing" in card and "2 annotators left without one" in card

    empty = tmp_path / "empty.jsonl"
    keys = ("video_id", "video_start_time", "video_end_time")
    empty.write_text("".join(json.dumps({**{k: r[k] for k in keys}, "prediction": ""}) + "\n" for r in records))
    arguments = ["evaluate", str(empty), "--dataset_name", str(output_dir), "--output_dir", str(tmp_path / "scores")]
    assert main([*arguments, "--num_bootstrap", "10"]) == 0
    scores = json.loads((tmp_path / "scores" / "results.json").read_text())["systems"]["empty"]
    assert scores["exact_match"] == scores["f1"] == 0.0
