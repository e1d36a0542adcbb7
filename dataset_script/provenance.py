"""Where a dataset came from: whether it is (built from) the bundled SYNTHETIC sample, whose numbers say nothing about
FIBER: training, scoring and model cards say "SYNTHETIC" of the sample, a folder that `build-dataset` made from it, or
a Hub copy of such a folder (its card's machine-readable `fiberbench: {synthetic: true}`).
"""

import logging
from pathlib import Path

from huggingface_hub import DatasetCard, hf_hub_download

from .fiber.release import SAMPLE_DIR, SPLIT_FILES

logger = logging.getLogger(__name__)

# The card's YAML key for what fiberbench knows of the build: `{"built_by": BUILT_BY, "version": ...,
# "synthetic": bool, "video_features": {config: its features.json}}`, read by training, scoring and model cards.
BUILD_INFO_KEY = "fiberbench"
BUILT_BY = "fiberbench build-dataset"


def is_synthetic(dataset_name: str | None) -> bool:
    """Whether `dataset_name` (None for the bundled sample, a local folder or a Hub id) is synthetic; a dataset whose
    card was not written by `build-dataset` is not known to be, and counts as real data."""
    if dataset_name is None:
        return True
    readme = Path(dataset_name) / "README.md"
    if not Path(dataset_name).is_dir():
        try:
            readme = Path(hf_hub_download(str(dataset_name), "README.md", repo_type="dataset"))
        except Exception as error:  # noqa: BLE001 - any failure to read the card means "not known to be synthetic"
            logger.warning("Could not read the dataset card of %s (%s); taking it for real data", dataset_name, error)
            return False
    info = DatasetCard.load(readme).data.to_dict().get(BUILD_INFO_KEY) if readme.is_file() else None
    return isinstance(info, dict) and info.get("built_by") == BUILT_BY and info.get("synthetic") is True


def sample_file_name(path: str | Path, what: str | None = None) -> str | None:
    """The name of the bundled sample's split file (`val.json`) that the file at `path` is, or is a byte-for-byte copy
    of (None for any other file); with `what` ("Statistics"), a warning says that the numbers of it are SYNTHETIC."""
    for name in SPLIT_FILES.values():
        sample = SAMPLE_DIR / name
        if sample.stat().st_size == Path(path).stat().st_size and sample.read_bytes() == Path(path).read_bytes():
            if what:
                logger.warning("%s of SYNTHETIC data (the bundled sample's %s): the numbers say nothing about FIBER",
                               what, name)
            return name
    return None


def synthetic_file_notice(sample_file: str) -> str:
    """The line that heads a report of the bundled sample's `sample_file` (or a copy): `agreement`'s and `stats`'."""
    return f"**SYNTHETIC data** (the bundled sample's {sample_file}, or a copy): the numbers say nothing about FIBER."
