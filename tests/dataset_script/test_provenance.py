"""is_synthetic: the bundled sample, a folder built from it and a Hub copy of it are SYNTHETIC; real data is not."""

import shutil

from fiberbench.data.build import Sources, build_dataset
from fiberbench.data.provenance import is_synthetic


def test_the_bundled_sample_and_its_builds_are_synthetic(built_sample):
    assert is_synthetic(None)
    assert is_synthetic(str(built_sample))


def test_a_build_from_other_data_is_not(tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(Sources.sample().split_files["train"].rsplit("/", 1)[0], data_dir, ignore=shutil.ignore_patterns("i3d"))
    build_dataset(Sources.from_location(data_dir), tmp_path / "fiber")
    assert not is_synthetic(str(tmp_path / "fiber"))


def test_a_folder_without_a_build_card_is_not(tmp_path):
    (tmp_path / "README.md").write_text("# my data\n")
    assert not is_synthetic(str(tmp_path))
