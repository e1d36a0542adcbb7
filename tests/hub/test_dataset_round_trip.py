"""`fiberbench build-dataset --push_to_hub`, then `load_dataset` from the Hub equals the local build, still SYNTHETIC."""

import sys

import datasets
import pytest

REPO_ID = "fiber-org/fiber"

# Runs in a fresh process, whose datasets and huggingface_hub read HF_ENDPOINT at import.
LOAD_FROM_HUB = """
import sys
import datasets
from huggingface_hub import hf_hub_download

repo_id, out = sys.argv[1], sys.argv[2]
datasets.load_dataset(repo_id).save_to_disk(f"{out}/default")
datasets.load_dataset(repo_id, "i3d").save_to_disk(f"{out}/i3d")
from fiberbench.data.provenance import is_synthetic

print(is_synthetic(repo_id), is_synthetic("fiber-org/no-such-dataset"))
print(hf_hub_download(repo_id, "README.md", repo_type="dataset"))
"""


@pytest.mark.slow
def test_build_push_and_load_dataset(hub_server, run_client, tmp_path):
    local = tmp_path / "fiber"
    run_client(
        [sys.executable, "-m", "fiberbench.cli", "build-dataset", "--output_dir", local, "--max_shard_size", "5MB"]
        + ["--push_to_hub", REPO_ID]
    )
    synthetic, card_path = run_client(
        [sys.executable, "-c", LOAD_FROM_HUB, REPO_ID, tmp_path / "pulled"]
    ).stdout.strip().splitlines()[-2:]

    assert synthetic == "True False"  # the Hub copy of the sample is still marked SYNTHETIC

    assert open(card_path, encoding="utf-8").read() == (local / "README.md").read_text(encoding="utf-8")
    for pulled_name, config in [("default", None), ("i3d", "i3d")]:
        expected = datasets.load_dataset(str(local), config, cache_dir=str(tmp_path / "cache"))
        pulled = datasets.load_from_disk(str(tmp_path / "pulled" / pulled_name))
        assert list(pulled) == list(expected) == ["train", "validation", "test"]
        for split in expected:
            assert pulled[split].features == expected[split].features, (config, split)
            assert pulled[split].data.table.equals(expected[split].data.table), (config, split)
    assert "video_features" in pulled["test"].features
