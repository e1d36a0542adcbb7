"""The bundled synthetic sample: where it lives, and `load_sample` to get it as a built `DatasetDict`.

`datasets` and the builder are imported inside the functions: `fiberbench.data` is imported by
every `fiberbench` subcommand, and most of them never build anything.
"""

import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from .fiber.release import SAMPLE_DIR

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)


def sample_fingerprint() -> str:
    """A hash of the sample's files and of the code that builds them, naming its cache folder."""
    from fiberbench import json_records, records

    from . import build
    from .fiber import card, features_info, fiber, release

    digest = hashlib.sha256()
    code_modules = (build, json_records, card, features_info, fiber, release, records)
    code_files = [Path(module.__file__) for module in code_modules] + [card.CARD_TEMPLATE_PATH]
    sample_files = sorted(path for path in SAMPLE_DIR.rglob("*") if path.is_file())
    for path in code_files + sample_files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def built_sample_dir() -> Path:
    """The sample built into a Hub-native folder (both configs), building it on first use (once, when runs start
    together: the others wait for that build)."""
    import datasets

    from fiberbench.ownership import shared_build

    from .build import Sources, build_dataset

    folder = Path(datasets.config.HF_DATASETS_CACHE) / "fiberbench" / f"sample-{sample_fingerprint()}"
    if (folder / "README.md").is_file():
        return folder
    # Runs started together on a fresh cache (two commands, an `accelerate launch`): one builds, the others wait.
    with shared_build(folder, "the bundled sample"):
        if not (folder / "README.md").is_file():
            logger.info("Building the bundled sample into %s", folder)
            build_dataset(Sources.sample(), folder)
    return folder


def load_sample(config_name: str = "text") -> "datasets.DatasetDict":
    """The bundled SYNTHETIC sample as a `datasets.DatasetDict` (train, validation, test).

    Made-up captions, answers and features for tests and demos (see `make_sample.py`): no number
    measured on it says anything about FIBER, and a warning says so on every load.
    `config_name` is "text" or "i3d" (which adds `video_features`, float32 of shape (T, 1024)).
    """
    import datasets

    logger.warning(
        "Loading the bundled SYNTHETIC sample (config %r): made-up data for tests and demos, not FIBER; "
        "no number measured on it says anything about FIBER.",
        config_name,
    )

    # An absolute path: `load_dataset` of a bare name may return an older cached copy.
    return datasets.load_dataset(str(built_sample_dir().resolve()), config_name)
