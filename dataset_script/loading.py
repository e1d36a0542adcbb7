"""FIBER as the commands that read it load it (training, `predict`, `evaluate`): one way, one set of errors."""

import hashlib
import logging
from pathlib import Path

import datasets
import filelock
import numpy as np
import yaml

from fiberbench.errors import DataError, UsageError, users_cause
from fiberbench.hub import is_hub_id
from fiberbench.records import check_tables

from .build import Sources, build_dataset
from .fiber.release import SAMPLE_DIR

logger = logging.getLogger(__name__)


def check_dataset_name(dataset_name: str) -> None:
    """A `DataError` for a --dataset_name that is neither a folder nor a possible Hub id (cheap: check it first)."""
    if Path(dataset_name).expanduser().is_file():
        raise DataError(f"--dataset_name {dataset_name} is a file; give a dataset folder or a Hub dataset id")
    if not Path(dataset_name).expanduser().is_dir() and not is_hub_id(dataset_name):
        raise DataError(f"--dataset_name {dataset_name}: no such folder (and not a Hub dataset id)")


def dataset_location(dataset_name: str | None) -> str | None:
    """What a run's record says it read: a local dataset folder as its absolute path (the same however it was
    spelled); a Hub id, or None (the bundled sample), as it is."""
    if dataset_name is None or not Path(dataset_name).expanduser().exists():
        return dataset_name
    return str(Path(dataset_name).expanduser().resolve())


def local_cache_dir(folder: Path) -> str:
    """A `datasets` cache of its own for the files of `folder` as they are now: `datasets` keys a local folder's cache
    by its name and config, so that a rebuilt folder, or another of the same name, would be read from the first's."""
    digest = hashlib.sha256(str(folder.resolve()).encode())
    for path in sorted(path for path in folder.rglob("*") if path.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return str(Path(datasets.config.HF_DATASETS_CACHE) / "fiberbench" / "local" / digest.hexdigest()[:16])


def load_fiber(dataset_name: str | None, config_name: str) -> datasets.DatasetDict:
    """The splits of `dataset_name` (a built folder or a Hub id; the bundled sample when None), config `config_name`,
    a folder's in a cache keyed by its files. A config it has not is a `UsageError` listing those it has; a dataset
    that cannot be read, a null text field or a video id that is not a plain id (`check_tables`) a `DataError`."""
    if dataset_name is None:
        logger.warning("Loading the bundled SYNTHETIC sample (config %r): made-up data for tests and demos, not FIBER; "
                       "no number measured on it says anything about FIBER.", config_name)
        folder = built_sample_dir()
        location, described, flag = str(folder), "the bundled sample", "the bundled sample"
    else:
        check_dataset_name(dataset_name)
        folder, described, flag = Path(dataset_name).expanduser(), dataset_name, f"--dataset_name {dataset_name}"
        location = str(folder.resolve()) if folder.is_dir() else dataset_name
    try:
        cache_dir = local_cache_dir(folder) if folder.is_dir() else None
        splits = datasets.load_dataset(location, config_name, cache_dir=cache_dir)
    except yaml.YAMLError as error:  # the dataset card's YAML header, which names the configs
        raise DataError(f"{flag}: its dataset card (README.md) has a broken YAML header: {error}") from error
    except datasets.exceptions.DatasetsError as error:  # e.g. a damaged Parquet shard: name what is behind it
        cause = users_cause(error) or error.__cause__ or error
        raise DataError(f"{flag}: cannot load its {config_name!r} config ({type(cause).__name__}: {cause})") from error
    except (OSError, ValueError) as error:  # DatasetNotFoundError is a FileNotFoundError
        cannot_load = DataError(f"{flag}: cannot load its {config_name!r} config ({error})")
        try:
            configs = datasets.get_dataset_config_names(location) if isinstance(error, ValueError) else [config_name]
        except (OSError, ValueError):
            raise cannot_load from error
        if config_name not in configs:
            has = ", ".join(configs)
            raise UsageError(f"--dataset_config_name {config_name}: {described} has no such config (it has: {has})")
        raise cannot_load from error
    check_tables({name: split.data for name, split in splits.items()}, flag)
    return splits


def split_fingerprint(split: datasets.Dataset, columns: list[str]) -> str:
    """A sha256 of the values of `columns` in every row of `split`, in order: two runs that record it (predict's
    settings) can tell that the data changed under the same name."""
    digest = hashlib.sha256()
    for batch in split.select_columns(columns).with_format("numpy").iter(batch_size=256):
        for column in columns:
            for value in batch[column]:
                if isinstance(value, np.ndarray):
                    digest.update(f"{value.dtype}{value.shape}".encode() + np.ascontiguousarray(value).tobytes())
                else:
                    digest.update(repr(value).encode())
                digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


def sample_fingerprint() -> str:
    """A hash of the sample's files and of the code that builds them (this folder's), naming its cache folder."""
    digest = hashlib.sha256()
    code = Path(__file__).parent
    paths = [*code.glob("*.py"), *code.glob("fiber/*.py"), *code.glob("fiber/*.md"), *SAMPLE_DIR.rglob("*")]
    for path in sorted(paths):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def built_sample_dir() -> Path:
    """The sample built into a Hub-native folder in the Hugging Face cache (both configs), built on first use: runs
    started together on a fresh cache (two commands, an `accelerate launch`) build it once, the others wait."""
    folder = Path(datasets.config.HF_DATASETS_CACHE) / "fiberbench" / f"sample-{sample_fingerprint()}"
    if not (folder / "README.md").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(folder.with_name(f"{folder.name}.building.lock")):
            if not (folder / "README.md").is_file():
                logger.info("Building the bundled sample into %s", folder)
                build_dataset(Sources.from_location(SAMPLE_DIR, SAMPLE_DIR / "i3d"), folder)
    return folder


def load_sample(config_name: str = "text") -> datasets.DatasetDict:
    """The bundled SYNTHETIC sample as a `datasets.DatasetDict` (train, validation, test), config "text" or "i3d"
    (which adds `video_features`, float32 of shape (T, 1024)): made-up captions, answers and features for tests and
    demos (`make_sample.py`). No number measured on it says anything about FIBER, and a warning says so on every load.
    """
    return load_fiber(None, config_name)
