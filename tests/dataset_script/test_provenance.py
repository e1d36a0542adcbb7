"""is_synthetic: the bundled sample, a folder built from it and a Hub copy of it are SYNTHETIC; real data is not."""

import json
import shutil

from fiberbench.data import SAMPLE_DIR
from fiberbench.data.build import Sources, build_dataset
from fiberbench.data.provenance import is_synthetic


def test_the_bundled_sample_and_its_builds_are_synthetic(built_sample):
    assert is_synthetic(None)
    assert is_synthetic(str(built_sample))


def test_a_build_from_a_copy_of_the_sample_is_synthetic_and_from_other_data_is_not(tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(SAMPLE_DIR, data_dir, ignore=shutil.ignore_patterns("i3d"))
    build_dataset(Sources.from_location(data_dir), tmp_path / "copy")
    assert is_synthetic(str(tmp_path / "copy"))
    card = (tmp_path / "copy" / "README.md").read_text()
    assert "> **SYNTHETIC DATA.**" in card and "a copy of the bundled SYNTHETIC sample" in card

    records = json.loads((data_dir / "train.json").read_text())
    (data_dir / "train.json").write_text(json.dumps(records[:-1]))
    build_dataset(Sources.from_location(data_dir), tmp_path / "other")
    assert not is_synthetic(str(tmp_path / "other"))
    assert "SYNTHETIC" not in (tmp_path / "other" / "README.md").read_text()


def test_a_folder_without_a_build_card_is_not(tmp_path):
    (tmp_path / "README.md").write_text("# my data\n")
    assert not is_synthetic(str(tmp_path))
