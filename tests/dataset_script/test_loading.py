"""fiberbench.data.load_fiber: how training, predict and evaluate load FIBER, and the errors they share."""

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fiberbench.data import load_fiber
from fiberbench.errors import DataError, UsageError


def test_the_bundled_sample_is_loaded_when_no_dataset_is_named():
    splits = load_fiber(None, "i3d")
    assert list(splits) == ["train", "validation", "test"]
    assert "video_features" in splits["train"].column_names


def test_a_built_folder_is_loaded_whatever_the_working_directory(built_sample, monkeypatch, tmp_path):
    monkeypatch.chdir(built_sample.parent)
    relative = load_fiber(built_sample.name, "text")
    monkeypatch.chdir(tmp_path)
    assert load_fiber(str(built_sample), "text")["test"].to_list() == relative["test"].to_list()


@pytest.mark.parametrize("named", [False, True], ids=["the sample", "a built folder"])
def test_an_unknown_config_is_a_usage_error_listing_the_configs(built_sample, named):
    described = str(built_sample) if named else "the bundled sample"
    with pytest.raises(UsageError, match=rf"--dataset_config_name video: {described} has no such config \(it has: "):
        load_fiber(str(built_sample) if named else None, "video")


def test_a_missing_folder_is_named_before_anything_is_loaded(tmp_path):
    with pytest.raises(DataError, match=r"no_such_fiber: no such folder \(and not a Hub dataset id\)"):
        load_fiber(str(tmp_path / "no_such_fiber"), "text")


def test_a_folder_without_data_is_a_data_error_naming_it(tmp_path):
    with pytest.raises(DataError, match=rf"--dataset_name {tmp_path}: cannot load its 'text' config \(.*any data files"):
        load_fiber(str(tmp_path), "text")


def test_a_folder_of_other_files_has_no_fiber_config(tmp_path):
    (tmp_path / "notes.txt").write_text("not FIBER", encoding="utf-8")
    with pytest.raises(UsageError, match=r"--dataset_config_name text: .* has no such config \(it has: default\)"):
        load_fiber(str(tmp_path), "text")


def test_a_hub_dataset_that_cannot_be_reached_is_one_error_at_once(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(DataError, match=r"--dataset_name org/fiber: not a local folder, and the Hub at .* cannot be"):
        load_fiber("org/fiber", "text")


def test_a_damaged_shard_is_a_data_error_naming_the_dataset(built_sample, tmp_path):
    copy = tmp_path / "fiber"
    shutil.copytree(built_sample, copy)
    shard = sorted((copy / "text").glob("test-*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(DataError, match=rf"--dataset_name {copy}: cannot load its 'text' config \(ArrowInvalid: "):
        load_fiber(str(copy), "text")


def test_two_folders_of_the_same_name_are_never_read_from_one_cache(built_sample, tmp_path):
    first, second = tmp_path / "a" / "fiber", tmp_path / "b" / "fiber"
    shutil.copytree(built_sample, first)
    shutil.copytree(built_sample, second)
    labels = load_fiber(str(first), "text")["test"]["label"]
    shard = next((second / "text").glob("test-*.parquet"))
    table = pq.read_table(shard)
    changed = table.set_column(table.column_names.index("label"), "label", pa.array(["a new label"] * len(table)))
    pq.write_table(changed, shard)  # the second folder's test labels differ, its row counts do not
    assert set(load_fiber(str(second), "text")["test"]["label"]) == {"a new label"}
    assert load_fiber(str(first), "text")["test"]["label"] == labels


def test_a_null_field_names_its_split_and_row(sample_with):
    copy = sample_with("label", 7, None)
    with pytest.raises(DataError, match=rf"--dataset_name {copy}: split test, row 7: field 'label' is null"):
        load_fiber(str(copy), "text")


@pytest.mark.parametrize("video_id", ["../outside/evil", "/etc/passwd", "a b", ""])
def test_a_video_id_that_is_not_a_plain_id_names_its_split_and_row(sample_with, video_id):
    """Ids become file names (feature files, videos): a dataset not made by build-dataset is checked as it is read."""
    copy = sample_with("video_id", 3, video_id)
    with pytest.raises(DataError, match=rf"--dataset_name {copy}: split test, row 3: field 'video_id': "
                       rf"'{video_id}' is not a plain video id \(only A-Z, a-z, 0-9, '_' and '-'\)"):
        load_fiber(str(copy), "text")


def test_a_card_with_broken_yaml_is_one_error(built_sample, tmp_path):
    copy = tmp_path / "fiber"
    shutil.copytree(built_sample, copy)
    card = copy / "README.md"
    card.write_text(card.read_text(encoding="utf-8").replace("configs:", "configs: [unclosed", 1), encoding="utf-8")
    with pytest.raises(DataError, match=r"its dataset card \(README.md\) has a broken YAML header"):
        load_fiber(str(copy), "text")


def test_a_file_is_not_taken_for_a_hub_id(built_sample):
    with pytest.raises(DataError, match=r"README.md is a file; give a dataset folder or a Hub dataset id"):
        load_fiber(str(built_sample / "README.md"), "text")
