"""Where a dataset came from: whether it is (built from) the bundled SYNTHETIC sample.

Numbers measured on the synthetic sample say nothing about FIBER, so training, scoring and model
cards ask this and say "SYNTHETIC" wherever the data came from: the bundled sample itself, a
folder that `build-dataset` made from it, or a Hub copy of such a folder (its card carries the
machine-readable `fiberbench.synthetic` field).
"""

import logging
import re
from pathlib import Path

from .fiber.release import SAMPLE_DIR

logger = logging.getLogger(__name__)

# The card's YAML key for what fiberbench knows of the build: `{"built_by": BUILT_BY, "version": ...,
# "synthetic": bool, "video_features": {config: features.json, or {"name": "i3d", ...}}}`. Machine-readable:
# training, scoring and model cards read `synthetic` from it, and `build-dataset --overwrite_output_dir`
# replaces only a folder that carries it.
BUILD_INFO_KEY = "fiberbench"
BUILT_BY = "fiberbench build-dataset"
# A card's YAML header: between a first line `---` and the next line `---`.
_CARD_HEADER = re.compile(r"\s*---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


def card_metadata(folder: str | Path) -> dict:
    """The YAML header of a dataset folder's card (README.md) as a dict: {} without a card or a header.

    Read with yaml alone: huggingface_hub's `DatasetCard.load` reads the same header, at the cost of
    a third of a second of imports to a command that only wants to know what the folder holds.

    Raises:
        yaml.YAMLError: the header is not YAML.
        ValueError: the header is YAML but not a mapping.
    """
    import yaml

    readme = Path(folder) / "README.md"
    if not readme.is_file():
        return {}
    header = _CARD_HEADER.match(readme.read_text(encoding="utf-8"))
    metadata = yaml.safe_load(header.group(1)) if header else None
    if not isinstance(metadata, dict | None):
        raise ValueError(f"{readme}: its YAML header is not a mapping")
    return metadata or {}


def read_build_info(folder: str | Path) -> dict | None:
    """The `fiberbench` block of a built folder's card, or None when the folder has no card written by `build-dataset`."""
    info = card_metadata(folder).get(BUILD_INFO_KEY)
    return info if isinstance(info, dict) and info.get("built_by") == BUILT_BY else None


def is_synthetic(dataset_name: str | None) -> bool:
    """Whether `dataset_name` (None for the bundled sample, a local folder or a Hub id) is synthetic.

    A folder or Hub dataset whose card was not written by `build-dataset` is not known to be
    synthetic, and counts as real data.
    """
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
