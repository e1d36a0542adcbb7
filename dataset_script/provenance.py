"""Where a dataset came from: whether it is (built from) the bundled SYNTHETIC sample.

Numbers measured on the synthetic sample say nothing about FIBER, so training, scoring and model
cards ask this and say "SYNTHETIC" wherever the data came from: the bundled sample itself, a
folder that `build-dataset` made from it, or a Hub copy of such a folder (its card carries the
machine-readable `fiberbench.synthetic` field).
"""

import logging
from pathlib import Path

from .fiber.release import SAMPLE_DIR

logger = logging.getLogger(__name__)


def is_synthetic(dataset_name: str | None) -> bool:
    """Whether `dataset_name` (None for the bundled sample, a local folder or a Hub id) is synthetic.

    A folder or Hub dataset whose card was not written by `build-dataset` is not known to be
    synthetic, and counts as real data.
    """
    from .fiber.card import read_build_info

    if dataset_name is None:
        return True
    folder = Path(dataset_name)
    if not folder.is_dir():
        from huggingface_hub import hf_hub_download

        try:
            folder = Path(hf_hub_download(str(dataset_name), "README.md", repo_type="dataset")).parent
        except Exception as error:  # noqa: BLE001 - any failure to read the card means "not known to be synthetic"
            logger.warning("Could not read the dataset card of %s (%s); taking it for real data", dataset_name, error)
            return False
    info = read_build_info(folder)
    return bool(info and info.get("synthetic"))


def sample_file_name(path: str | Path) -> str | None:
    """The name of the bundled sample's split file (`val.json`) that the file at `path` is, or is a byte-for-byte copy
    of; None for any other file. Commands that read a release-format file say SYNTHETIC of these."""
    size = Path(path).stat().st_size
    for name in ("train.json", "val.json", "test.json"):
        sample = SAMPLE_DIR / name
        if sample.stat().st_size == size and sample.read_bytes() == Path(path).read_bytes():
            return name
    return None


def synthetic_file_notice(sample_file: str) -> str:
    """The line that heads a report of the bundled sample's `sample_file` (or a copy): `agreement`'s and `stats`'."""
    return f"**SYNTHETIC data** (the bundled sample's {sample_file}, or a copy): the numbers say nothing about FIBER."
