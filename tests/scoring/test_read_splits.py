"""`read_splits`: a built folder read straight from its Parquet files gives the rows `load_fiber` gives, the same
errors, and never imports `datasets`; whatever it cannot read so goes through `load_fiber`."""

import shutil
import subprocess
import sys

import pytest

from fiberbench.data import load_fiber
from fiberbench.errors import DataError, UsageError
from fiberbench.metric.scoring.split import SCORED_COLUMNS, built_folder_tables, read_splits


def through_load_fiber(dataset_name: str, config_name: str) -> dict:
    """`load_fiber`'s splits as lists of rows of the scored columns, by split, in its order."""
    splits = load_fiber(dataset_name, config_name)
    return {
        name: split.select_columns([column for column in SCORED_COLUMNS if column in split.column_names]).to_list()
        for name, split in splits.items()
    }


def as_rows(tables: dict) -> dict:
    return {
        name: table.select([column for column in SCORED_COLUMNS if column in table.column_names]).to_pylist()
        for name, table in tables.items()
    }


def test_a_built_folder_gives_the_rows_load_fiber_gives_in_its_order(built_sample):
    tables = built_folder_tables(built_sample, "text", f"--dataset_name {built_sample}")
    assert tables is not None  # read from the Parquet files, not through load_fiber
    assert as_rows(tables) == through_load_fiber(str(built_sample), "text")


def test_a_built_folder_is_read_without_importing_datasets(built_sample):
    code = (
        "import sys\nfrom fiberbench.metric.scoring.split import read_splits\n"
        f"splits = read_splits({str(built_sample)!r}, 'text')\n"
        "print(list(splits), 'datasets' in sys.modules, 'pandas' in sys.modules)"
    )
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert printed.split() == ["['train',", "'validation',", "'test']", "False", "False"]


def test_video_features_and_other_layouts_go_through_load_fiber(built_sample, tmp_path):
    assert built_folder_tables(built_sample, "i3d", "") is None  # its video features are checked by load_fiber
    assert as_rows(read_splits(str(built_sample), "i3d")) == through_load_fiber(str(built_sample), "i3d")
    assert built_folder_tables(tmp_path, "text", "") is None  # no card


def test_a_shard_of_other_types_goes_through_load_fiber(built_sample, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "fiber"
    shutil.copytree(built_sample, copy)
    shard = next((copy / "text").glob("test-*.parquet"))
    table = pq.read_table(shard)
    index = table.column_names.index("video_start_time")
    pq.write_table(table.set_column(index, "video_start_time", table.column(index).cast(pa.int64())), shard)
    assert built_folder_tables(copy, "text", "") is None  # load_dataset casts it back to the card's int32
    assert as_rows(read_splits(str(copy), "text")) == through_load_fiber(str(copy), "text")


def test_a_null_or_a_bad_video_id_is_the_error_load_fiber_gives(sample_with):
    for column, value in (("label", None), ("video_id", "../outside/evil")):
        copy = sample_with(column, 3, value)
        with pytest.raises(DataError) as ours:
            read_splits(str(copy), "text")
        with pytest.raises(DataError) as theirs:
            load_fiber(str(copy), "text")
        assert str(ours.value) == str(theirs.value) and "split test, row 3" in str(ours.value)
        shutil.rmtree(copy)


@pytest.mark.parametrize("damage", ["a damaged shard", "broken YAML", "no such config"])
def test_what_cannot_be_read_is_the_error_load_fiber_gives(damage, built_sample, tmp_path):
    copy = tmp_path / "fiber"
    shutil.copytree(built_sample, copy)
    config = "text"
    if damage == "a damaged shard":
        shard = sorted((copy / "text").glob("test-*.parquet"))[0]
        shard.write_bytes(shard.read_bytes()[:100])
    elif damage == "broken YAML":
        card = copy / "README.md"
        card.write_text(card.read_text(encoding="utf-8").replace("configs:", "configs: [unclosed", 1), encoding="utf-8")
    else:
        config = "video"
    with pytest.raises((DataError, UsageError)) as ours:
        read_splits(str(copy), config)
    with pytest.raises((DataError, UsageError)) as theirs:
        load_fiber(str(copy), config)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
