"""FIBER as the commands that read it load it (training, `predict`, `evaluate`): one way, one set of errors.

A dataset is a folder written by `fiberbench build-dataset`, a Hub dataset id, or None for the
bundled sample. `datasets` is imported inside the functions: `fiberbench.data` is imported by
every `fiberbench` subcommand, and most of them never load a dataset.
"""

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.errors import DataError, FiberbenchError, UsageError, users_cause

from .sample import built_sample_dir, load_sample

if TYPE_CHECKING:
    import datasets

# Columns a row cannot do without where the dataset has them.
REQUIRED_NON_NULL = ("video_id", "masked_caption", "label", "video_features")


def check_dataset_name(dataset_name: str) -> None:
    """A `DataError` for a --dataset_name that is neither a folder nor a possible Hub id (cheap: check it first)."""
    from fiberbench.hub import is_hub_id

    if Path(dataset_name).expanduser().is_file():
        raise DataError(f"--dataset_name {dataset_name} is a file; give a dataset folder or a Hub dataset id")
    if not Path(dataset_name).expanduser().is_dir() and not is_hub_id(dataset_name):
        raise DataError(f"--dataset_name {dataset_name}: no such folder (and not a Hub dataset id)")


def check_hub_dataset(dataset_name: str, flag: str = "--dataset_name") -> None:
    """A `DataError`, in seconds, for a Hub dataset that cannot be downloaded now.

    Without it `datasets` retries for half a minute before its own error. Offline
    (`HF_HUB_OFFLINE=1`) the cache is left to answer.
    """
    from huggingface_hub import constants

    from fiberbench.hub import hub_problem

    problem = None if constants.HF_HUB_OFFLINE else hub_problem(dataset_name, repo_type="dataset")
    if problem is not None:
        raise DataError(
            f"{flag} {dataset_name}: not a local folder, and {problem}. Ways out: a local copy; or, if it is "
            "in the Hugging Face cache, run with HF_HUB_OFFLINE=1."
        )


def local_cache_dir(folder: Path) -> str:
    """A `datasets` cache of its own for the files of `folder` as they are now.

    `datasets` keys the Arrow cache of a local folder by the folder's name and config, not by its
    files: another folder of the same name (or this one rebuilt) was read from the first one's
    cache, measured with datasets 5.2. Here the key is every file's path, size and modification time.
    """
    import datasets

    digest = hashlib.sha256(str(folder.resolve()).encode())
    for path in sorted(path for path in folder.rglob("*") if path.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return str(Path(datasets.config.HF_DATASETS_CACHE) / "fiberbench" / "local" / digest.hexdigest()[:16])


def load_fiber(dataset_name: str | None, config_name: str) -> "datasets.DatasetDict":
    """The splits of `dataset_name` (a built folder or a Hub id; the bundled sample when None), config `config_name`.

    A folder gets a cache keyed by its files (`local_cache_dir`), so a rebuilt folder, or another
    of the same name, is never read from an older cache. A config the dataset does not have is a
    `UsageError` listing those it has; a dataset that cannot be found or read is a `DataError`
    naming --dataset_name and the config.
    """
    import datasets

    if dataset_name is None:
        location, described, flag = None, "the bundled sample", "the bundled sample"
    else:
        check_dataset_name(dataset_name)
        folder = Path(dataset_name).expanduser()
        location, described = (str(folder.resolve()) if folder.is_dir() else dataset_name), dataset_name
        flag = f"--dataset_name {dataset_name}"
        if not folder.is_dir():
            check_hub_dataset(dataset_name)
    import yaml

    try:
        if location is None:
            return load_sample(config_name)
        cache_dir = local_cache_dir(folder) if folder.is_dir() else None
        splits = datasets.load_dataset(location, config_name, cache_dir=cache_dir)
    except FiberbenchError:
        raise
    except yaml.YAMLError as error:  # the dataset card's YAML header, which names the configs
        raise DataError(f"{flag}: its dataset card (README.md) has a broken YAML header: {error}") from error
    except datasets.exceptions.DatasetsError as error:  # e.g. a damaged Parquet shard: name what is behind it
        cause = users_cause(error) or error.__cause__ or error
        raise DataError(f"{flag}: cannot load its {config_name!r} config ({type(cause).__name__}: {cause})") from error
    except (OSError, ValueError) as error:  # DatasetNotFoundError is a FileNotFoundError
        cannot_load = f"{flag}: cannot load its {config_name!r} config ({error})"
        if isinstance(error, ValueError):
            try:
                configs = datasets.get_dataset_config_names(location or str(built_sample_dir().resolve()))
            except (OSError, ValueError):
                raise DataError(cannot_load) from error
            if config_name not in configs:
                raise UsageError(
                    f"--dataset_config_name {config_name}: {described} has no such config "
                    f"(it has: {', '.join(configs)})"
                ) from error
        raise DataError(cannot_load) from error
    check_tables({name: split.data for name, split in splits.items()}, flag)
    return splits


def check_tables(tables: dict, flag: str) -> None:
    """The checks of a dataset's splits made before any work, however they were read (`tables`: each split's name to
    its Arrow table): no null text or features (`check_no_nulls`), plain video ids (`check_video_ids`)."""
    check_no_nulls(tables, flag)
    check_video_ids(tables, flag)


def check_no_nulls(tables: dict, flag: str) -> None:
    """A `DataError` naming the first row whose text or video features are missing (null), before any work.

    `tables` maps each split's name to its Arrow table. A build never writes nulls; a Parquet file
    written by other means can, and a null reaches the model as a shape error far from its row.
    """
    import pyarrow.compute

    for name, table in tables.items():
        for column in REQUIRED_NON_NULL:
            if column in table.column_names and table.column(column).null_count:
                row = pyarrow.compute.index(table.column(column).is_null(), True).as_py()
                raise DataError(f"{flag}: split {name}, row {row}: field {column!r} is null")


def check_video_ids(tables: dict, flag: str) -> None:
    """A `DataError` naming the first row whose `video_id` is not a plain id (`check_plain_video_id`), before any work.

    `tables` maps each split's name to its Arrow table. A build checks every id; a dataset made
    otherwise may hold `../outside/evil`, which `predict` would turn into a path out of --video_dir.
    """
    import pyarrow.compute

    from fiberbench.records import VIDEO_ID_PATTERN, check_plain_video_id

    for name, table in tables.items():
        if "video_id" not in table.column_names:
            continue
        column = table.column("video_id")
        plain = pyarrow.compute.match_substring_regex(column, f"^(?:{VIDEO_ID_PATTERN.pattern})$")
        if not pyarrow.compute.all(plain).as_py():
            row = pyarrow.compute.index(plain, False).as_py()
            try:
                check_plain_video_id(column[row].as_py())
            except ValueError as error:
                raise DataError(f"{flag}: split {name}, row {row}: field 'video_id': {error}") from None


def split_fingerprint(split: "datasets.Dataset", columns: list[str]) -> str:
    """A sha256 of the values of `columns` in every row of `split`, in order.

    Two runs that record it (predict's settings, a training checkpoint) can tell that the data
    changed under the same name: a rebuilt folder, other captions, other features.
    """
    import numpy as np

    digest = hashlib.sha256()
    for batch in split.select_columns(columns).with_format("numpy").iter(batch_size=256):
        for column in columns:
            for value in batch[column]:
                if isinstance(value, np.ndarray):
                    digest.update(f"{value.dtype}{value.shape}".encode())
                    digest.update(np.ascontiguousarray(value).tobytes())
                else:
                    digest.update(repr(value).encode())
                digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"
