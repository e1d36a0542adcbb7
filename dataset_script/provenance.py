"""Where a dataset came from: whether it is (built from) the bundled SYNTHETIC sample.

Numbers measured on the synthetic sample say nothing about FIBER, so training, scoring and model cards ask this and
say "SYNTHETIC" of the bundled sample, a folder that `build-dataset` made from it, or a Hub copy of such a folder
(its card carries the machine-readable `fiberbench: {synthetic: true}` field).
"""

import logging
import re
from pathlib import Path

import yaml
from huggingface_hub import hf_hub_download

from .fiber.release import SAMPLE_DIR, SPLIT_FILES

logger = logging.getLogger(__name__)

# The card's YAML key for what fiberbench knows of the build: `{"built_by": BUILT_BY, "version": ...,
# "synthetic": bool, "video_features": {config: its features.json}}`, read by training, scoring and model cards.
BUILD_INFO_KEY = "fiberbench"
BUILT_BY = "fiberbench build-dataset"
# A card's YAML header: between a first line `---` and the next line `---`.
_CARD_HEADER = re.compile(r"\s*---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


def card_metadata(folder: str | Path) -> dict:
    """The YAML header of a dataset folder's card (README.md) as a dict ({} without a card or a header); a
    `yaml.YAMLError` when it is not YAML, a ValueError when it is not a mapping."""
    readme = Path(folder) / "README.md"
    if not readme.is_file():
        return {}
    header = _CARD_HEADER.match(readme.read_text(encoding="utf-8"))
    metadata = yaml.safe_load(header.group(1)) if header else None
    if not isinstance(metadata, dict | None):
        raise ValueError(f"{readme}: its YAML header is not a mapping")
    return metadata or {}


def read_build_info(folder: str | Path) -> dict | None:
    """The `fiberbench` block of a built folder's card; None when no card written by `build-dataset` is there."""
    info = card_metadata(folder).get(BUILD_INFO_KEY)
    return info if isinstance(info, dict) and info.get("built_by") == BUILT_BY else None


def is_synthetic(dataset_name: str | None) -> bool:
    """Whether `dataset_name` (None for the bundled sample, a local folder or a Hub id) is synthetic; a dataset whose
    card was not written by `build-dataset` is not known to be, and counts as real data."""
    if dataset_name is None:
        return True
    folder = Path(dataset_name)
    if not folder.is_dir():
        try:
            folder = Path(hf_hub_download(str(dataset_name), "README.md", repo_type="dataset")).parent
        except Exception as error:  # noqa: BLE001 - any failure to read the card means "not known to be synthetic"
            logger.warning("Could not read the dataset card of %s (%s); taking it for real data", dataset_name, error)
            return False
    info = read_build_info(folder)
    return bool(info and info.get("synthetic"))


def sample_file_name(path: str | Path, what: str | None = None) -> str | None:
    """The name of the bundled sample's split file (`val.json`) that the file at `path` is, or is a byte-for-byte copy
    of (None for any other file); with `what` ("Statistics"), a warning says that the numbers of it are SYNTHETIC."""
    size = Path(path).stat().st_size
    for name in SPLIT_FILES.values():
        if (SAMPLE_DIR / name).stat().st_size == size and (SAMPLE_DIR / name).read_bytes() == Path(path).read_bytes():
            if what:
                logger.warning("%s of SYNTHETIC data (the bundled sample's %s): the numbers say nothing about FIBER",
                               what, name)
            return name
    return None


def synthetic_file_notice(sample_file: str) -> str:
    """The line that heads a report of the bundled sample's `sample_file` (or a copy): `agreement`'s and `stats`'."""
    return f"**SYNTHETIC data** (the bundled sample's {sample_file}, or a copy): the numbers say nothing about FIBER."
