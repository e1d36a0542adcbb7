"""`fiberbench.data.load_fiber` and `load_sample`: how training, predict and evaluate load FIBER, and their errors."""

import logging
import shutil
import subprocess
import sys

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fiberbench.data import load_fiber, load_sample
from fiberbench.errors import DataError, UsageError

from .conftest import cases


def test_the_bundled_sample_is_built_once_and_says_synthetic(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path)
    with caplog.at_level(logging.WARNING):
        sample = load_sample("i3d")
    assert "Loading the bundled SYNTHETIC sample" in caplog.text and "video_features" in sample["train"].column_names
    assert {split: sample[split].num_rows for split in sample} == {"train": 400, "validation": 60, "test": 60}
    built = list((tmp_path / "fiberbench").glob("sample-*/README.md"))
    assert len(built) == 1 and load_fiber(None, "text")["test"].num_rows == 60
    assert list((tmp_path / "fiberbench").glob("sample-*/README.md")) == built


@pytest.mark.slow
def test_two_first_loads_at_once_build_the_sample_once(tmp_path):
    code = "import logging, fiberbench.data as d; logging.basicConfig(level=20); print(d.load_sample()['test'].num_rows)"
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    runs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [out.strip() for out, _ in outputs] == ["60", "60"], outputs
    assert sum(err.count("Building the bundled sample into") for _, err in outputs) == 1


def test_two_folders_of_the_same_name_are_never_read_from_one_cache(built_sample, tmp_path, monkeypatch):
    first, second = tmp_path / "a" / "fiber", tmp_path / "b" / "fiber"
    shutil.copytree(built_sample, first)
    shutil.copytree(built_sample, second)
    labels = load_fiber(str(first), "text")["test"]["label"]
    shard = next((second / "text").glob("test-*.parquet"))
    table = pq.read_table(shard)
    pq.write_table(table.set_column(table.column_names.index("label"), "label", pa.array(["new"] * len(table))), shard)
    assert set(load_fiber(str(second), "text")["test"]["label"]) == {"new"}
    monkeypatch.chdir(first.parent)  # and a relative name is the folder of this working directory
    assert load_fiber("fiber", "text")["test"]["label"] == labels


def damage_shard(folder):
    shard = sorted((folder / "text").glob("test-*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[:100])


def break_card(folder):
    card = folder / "README.md"
    card.write_text(card.read_text(encoding="utf-8").replace("configs:", "configs: [unclosed", 1), encoding="utf-8")


# (what is wrong, how the copy of the built sample is broken, the config asked, the error, what the line says)
BAD_DATASETS = [
    ("no such config", None, "video", UsageError, r"--dataset_config_name video: .* has no such config \(it has: "),
    ("a damaged shard", damage_shard, "text", DataError, r"cannot load its 'text' config \(ArrowInvalid: "),
    ("a card with broken YAML", break_card, "text", DataError, r"its dataset card \(README.md\) has a broken YAML header"),
    ("a null label", ("label", 7, None), "text", DataError, r"split test, row 7: field 'label' is null"),
    ("a path for a video id", ("video_id", 3, "../outside/evil"), "text", DataError,
     r"split test, row 3: field 'video_id': '../outside/evil' is not a plain video id \(only A-Z, a-z, 0-9, '_' and '-'\)"),
    ("an empty video id", ("video_id", 3, ""), "text", DataError, r"split test, row 3: field 'video_id': '' is not a plain"),
]


@pytest.mark.parametrize(("breaks", "config", "error", "message"), cases(BAD_DATASETS))
def test_a_bad_dataset_is_one_error_naming_it(built_sample, sample_with, tmp_path, breaks, config, error, message):
    if isinstance(breaks, tuple):  # a dataset made by other means may hold this value in the text test split
        folder = sample_with(*breaks)
    else:
        folder = tmp_path / "fiber"
        shutil.copytree(built_sample, folder)
        if breaks:
            breaks(folder)
    with pytest.raises(error, match=message):
        load_fiber(str(folder), config)


@pytest.mark.parametrize(("name", "message"), [
    ("{tmp}/no_such_fiber", r"no_such_fiber: no such folder \(and not a Hub dataset id\)"),
    ("{tmp}", r"cannot load its 'text' config"), ("{sample}/README.md", r"README.md is a file; give a dataset folder"),
])
def test_a_name_that_is_not_a_dataset_is_one_error(built_sample, tmp_path, name, message):
    with pytest.raises(DataError, match=message):
        load_fiber(name.format(tmp=tmp_path, sample=built_sample), "text")
