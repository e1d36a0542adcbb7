"""`fiberbench build-dataset`: run the FIBER builder and write a Hub-native Parquet dataset folder.

The folder holds `text/{split}-*.parquet`, `i3d/{split}-*.parquet` (when features are given) and a
README.md card whose YAML declares the configs and their features, so `load_dataset(folder)` and
`load_dataset(folder, "i3d")` read it and `--push_to_hub` publishes it as it is.

`datasets`, the builder, the card and the Hub client are imported where a build or a push needs
them, so that `fiberbench build-dataset --help` answers at once.
"""

import argparse
import logging
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fiberbench.errors import DataError, UsageError, users_cause
from fiberbench.ownership import FOLDER_RECORD, Output

from .fiber.release import CATEGORY_FILES, RELEASE_CATEGORY_URLS, RELEASE_URLS, SPLIT_FILES
from .sample import SAMPLE_DIR

if TYPE_CHECKING:
    from .fiber.fiber import DroppedAnswers, Fiber
    from .fiber.validation import InvalidRecordError

logger = logging.getLogger(__name__)

DEFAULT_MAX_SHARD_SIZE = "500MB"


@dataclass(frozen=True)
class Sources:
    """Where release-format data comes from: JSON files, optional category files and features folder."""

    split_files: dict[str, str]
    category_files: dict[str, str]
    features_dir: str | None
    description: str
    synthetic: bool = False

    @classmethod
    def release(cls, features_dir: str | Path | None = None) -> "Sources":
        """The official release, downloaded from its URLs (needs the internet)."""
        return cls(
            dict(RELEASE_URLS),
            dict(RELEASE_CATEGORY_URLS),
            _absolute(features_dir),
            "the official FIBER release files (https://lit.eecs.umich.edu/fiber/)",
        )

    @classmethod
    def sample(cls) -> "Sources":
        """The SYNTHETIC sample bundled with the package, with its features."""
        return cls.from_location(SAMPLE_DIR, SAMPLE_DIR / "i3d")

    @classmethod
    def from_location(cls, location: str | Path, features_dir: str | Path | None = None) -> "Sources":
        """A local folder, or a base URL, holding train.json, val.json and test.json.

        A local folder's category files (categories_val.tsv or val_label_categories.tsv, and the
        same for test) are used when present; a URL's are not looked for.
        """
        location = str(location)
        if location.startswith(("http://", "https://")):
            base = location.rstrip("/")
            split_files = {split: f"{base}/{name}" for split, name in SPLIT_FILES.items()}
            return cls(split_files, {}, _absolute(features_dir), f"the files at {base}")
        folder = Path(location).absolute()
        missing = [name for name in SPLIT_FILES.values() if not (folder / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{folder}: no {', '.join(missing)} (expected the release's train/val/test JSON)")
        if folder.resolve() == SAMPLE_DIR.resolve():
            description, synthetic = "the bundled SYNTHETIC sample", True
        elif _holds_the_sample(folder):
            description, synthetic = f"the local folder `{folder.name}`, a copy of the bundled SYNTHETIC sample", True
        else:
            description, synthetic = f"the local folder `{folder.name}`", False
        return cls(
            {split: str(folder / name) for split, name in SPLIT_FILES.items()},
            {
                split: str(path)
                for split, names in CATEGORY_FILES.items()
                if (path := next((folder / name for name in names if (folder / name).is_file()), None))
            },
            _absolute(features_dir),
            description,
            synthetic,
        )


def _holds_the_sample(folder: Path) -> bool:
    """Whether the split files in `folder` are byte for byte the bundled sample's (a copy of it is SYNTHETIC too)."""
    return all(
        (folder / name).stat().st_size == (SAMPLE_DIR / name).stat().st_size
        and (folder / name).read_bytes() == (SAMPLE_DIR / name).read_bytes()
        for name in SPLIT_FILES.values()
    )


def _absolute(path: str | Path | None) -> str | None:
    return None if path is None else str(Path(path).absolute())


@dataclass(frozen=True)
class BuildResult:
    """What a build wrote: the folder, rows per config and split, the records it skipped and, per config and
    split, the answers it dropped as normalizing to nothing."""

    output_dir: Path
    num_examples: dict[str, dict[str, int]]
    invalid_records: dict[str, list["InvalidRecordError"]]
    dropped_answers: dict[str, dict[str, "DroppedAnswers"]]


def _prepare(config: str, sources: Sources, work_dir: Path, *, skip_invalid: bool, max_shard_size: str) -> "Fiber":
    """Run the builder for one config into `work_dir/prepared/<config>` as Parquet shards."""
    import datasets

    from .fiber.fiber import I3D_WRITER_BATCH_SIZE, Fiber

    builder = Fiber(
        config_name=config,
        # A fresh cache inside the build: no earlier build's info can leak into this one.
        cache_dir=str(work_dir / "cache"),
        split_files=sources.split_files,
        category_files=sources.category_files,
        features_dir=sources.features_dir,
        skip_invalid=skip_invalid,
        writer_batch_size=I3D_WRITER_BATCH_SIZE if config == "i3d" else None,
    )
    logger.info("Building the %r config from %s", config, sources.description)
    try:
        builder.download_and_prepare(
            str(work_dir / "prepared" / config),
            # Downloads go to the shared cache so that a rebuild does not fetch the release again.
            download_config=datasets.DownloadConfig(cache_dir=datasets.config.DOWNLOADED_DATASETS_PATH),
            file_format="parquet",
            max_shard_size=max_shard_size,
        )
    except datasets.exceptions.DatasetGenerationError as error:
        cause = users_cause(error)
        if cause is not None:
            raise cause from None
        raise
    return builder


def _move_shards(builder: "Fiber", prepared_dir: Path, config_dir: Path) -> dict[str, list[Path]]:
    """Move the builder's `fiber-<split>[-i-of-n].parquet` files to `<config>/<split>-i-of-n.parquet`."""
    config_dir.mkdir(parents=True)
    shards = {}
    for split in builder.info.splits:
        files = sorted(prepared_dir.glob(f"{builder.dataset_name}-{split}*.parquet"))
        shards[split] = [config_dir / f"{split}-{index:05d}-of-{len(files):05d}.parquet" for index in range(len(files))]
        for source, target in zip(files, shards[split]):
            os.replace(source, target)
    return shards


# What a build writes in its folder: the card and one folder of Parquet shards per config.
BUILD_ENTRIES = re.compile(r"README\.md|[a-z0-9][a-z0-9_-]*")


def dataset_output(output_dir: Path, sources: Sources, overwrite: bool) -> Output:
    """The output folder, checked before any work (see `fiberbench.ownership.Output.check`).

    Never an input (or a folder holding one), the current or the home directory; an existing
    folder is replaced only with `overwrite`, and only when `build-dataset` wrote it and it holds
    nothing else (a file a user put there would be lost with it).
    """
    local_inputs = [
        path
        for path in (*sources.split_files.values(), *sources.category_files.values(), sources.features_dir)
        if path is not None and not str(path).startswith(("http://", "https://"))
    ]
    output = Output(
        output_dir,
        command="fiberbench build-dataset",
        flag="--output_dir",
        overwrite=overwrite,
        overwrite_flag="--overwrite_output_dir",
        folder=True,
        entry_names=BUILD_ENTRIES,
    )
    output.check(local_inputs)
    return output


def _check_max_shard_size(max_shard_size: str) -> None:
    from datasets.utils.py_utils import convert_file_size_to_int

    try:
        valid = convert_file_size_to_int(max_shard_size) > 0
    except ValueError:
        valid = False
    if not valid:
        raise UsageError(f"--max_shard_size {max_shard_size!r}: expected a positive size such as 500MB")


def build_dataset(
    sources: Sources | str | Path,
    output_dir: str | Path,
    *,
    skip_invalid: bool = False,
    max_shard_size: str = DEFAULT_MAX_SHARD_SIZE,
    overwrite: bool = False,
    repo_id: str | None = None,
) -> BuildResult:
    """Build FIBER (or data in its release format) into the Hub-native folder `output_dir`.

    The `text` config is always built, the `i3d` config when `sources` has a features folder. All
    work happens in a hidden folder beside `output_dir` that is renamed into place at the end and
    removed on any failure (`fiberbench.files.atomic_folder`): a failed build leaves nothing at
    `output_dir`. A build holds the folder's lock while it runs: a second build into it is refused.

    Args:
        sources: a `Sources`, or a local folder / base URL (see `Sources.from_location`).
        output_dir: the folder to write; it must not exist unless `overwrite`.
        skip_invalid: skip invalid records (counted in the result and the card) instead of failing.
        max_shard_size: the largest Parquet shard, before compression (e.g. "500MB").
        overwrite: replace an existing `output_dir` that an earlier build wrote (only once the new
            one is complete); see `dataset_output` for what is never written.
        repo_id: the Hub repository it is meant for, named in the card's usage example.

    Raises:
        InvalidRecordError: a record is invalid (naming the file, record index and field).
        DataError: the features folder does not exist.
        UsageError: `output_dir` may not be written (see `dataset_output`), another build is writing it, or
            `max_shard_size` is not a size.
        FileExistsError: another build published `output_dir` first.
    """
    from .fiber.card import make_dataset_card

    if not isinstance(sources, Sources):
        sources = Sources.from_location(sources)
    if sources.features_dir is not None and not Path(sources.features_dir).is_dir():
        problem = "not a folder" if Path(sources.features_dir).exists() else "no such folder"
        raise DataError(f"{sources.features_dir}: {problem} (the I3D features folder)")
    _check_max_shard_size(max_shard_size)
    output_dir = Path(output_dir).expanduser().absolute()
    output = dataset_output(output_dir, sources, overwrite)
    with output.lock(), output.atomic_folder() as dataset_dir:
        # The builder's cache and prepared files, inside the staging folder so that a killed build
        # leaves one thing behind, which the next build of `output_dir` removes.
        work_dir = dataset_dir / ".build"
        configs = ["text", "i3d"] if sources.features_dir else ["text"]
        infos, data_files, shards, invalid_records, dropped_answers = {}, {}, {}, {}, {}
        for config in configs:
            builder = _prepare(config, sources, work_dir, skip_invalid=skip_invalid, max_shard_size=max_shard_size)
            shards[config] = _move_shards(builder, work_dir / "prepared" / config, dataset_dir / config)
            # On the Hub, `download_size` is what a user downloads: this config's Parquet files, not
            # the release files the builder read.
            builder.info.download_size = sum(path.stat().st_size for paths in shards[config].values() for path in paths)
            infos[config] = builder.info
            data_files[config] = {split: f"{config}/{split}-*.parquet" for split in builder.info.splits}
            invalid_records[config] = builder.invalid_records
            dropped_answers[config] = builder.dropped_answers
        card = make_dataset_card(
            infos,
            data_files,
            shards["text"],
            source=sources.description,
            synthetic=sources.synthetic,
            skipped={config: len(errors) for config, errors in invalid_records.items()},
            dropped_answers=dropped_answers["text"],
            repo_hint=repo_id or output_dir.name,
        )
        card.save(dataset_dir / "README.md")
        shutil.rmtree(work_dir)
    num_examples = {
        config: {split: split_info.num_examples for split, split_info in info.splits.items()}
        for config, info in infos.items()
    }
    return BuildResult(output_dir, num_examples, invalid_records, dropped_answers)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `build-dataset` flags."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--data_dir",
        help="Local folder or base URL with train.json, val.json, test.json (and, in a local folder, "
        "categories_val.tsv, categories_test.tsv). Default: the bundled SYNTHETIC sample, with its features.",
    )
    source.add_argument(
        "--release",
        action="store_true",
        help="Download the official FIBER release (JSON and category files; needs the internet).",
    )
    parser.add_argument(
        "--features_dir",
        type=Path,
        help="Folder of I3D features, {video_id}_{start:06d}_{end:06d}.npy of shape (1, T, 1024): "
        "adds the `i3d` config. For the real data, VaTeX's I3D features, downloaded and extracted.",
    )
    parser.add_argument("--output_dir", type=Path, default=Path("fiber"), help="Folder to write (default: ./fiber).")
    parser.add_argument("--overwrite_output_dir", action="store_true", help="Replace --output_dir if it exists.")
    parser.add_argument(
        "--skip_invalid", action="store_true", help="Skip invalid records (counted and reported) instead of stopping."
    )
    parser.add_argument(
        "--max_shard_size",
        default=DEFAULT_MAX_SHARD_SIZE,
        help=f"Largest Parquet shard before compression (default: {DEFAULT_MAX_SHARD_SIZE}).",
    )
    parser.add_argument("--push_to_hub", metavar="REPO_ID", help="Push the built folder to this Hub dataset repo.")
    parser.add_argument("--hub_private_repo", action="store_true", help="Create the Hub repo as private.")


def _sources_from_args(args: argparse.Namespace) -> Sources:
    if args.release:
        return Sources.release(args.features_dir)
    if args.data_dir is None and args.features_dir is None:
        return Sources.sample()
    return Sources.from_location(args.data_dir or SAMPLE_DIR, args.features_dir)


def _log_summary(result: BuildResult) -> None:
    for config, splits in result.num_examples.items():
        sizes = ", ".join(f"{split} {count:,}" for split, count in splits.items())
        logger.info("%s: %s", config, sizes)
    for config, errors in result.invalid_records.items():
        if errors:
            counts = Counter((error.file, error.field) for error in errors)
            details = "; ".join(f"{count} in {file} ({field})" for (file, field), count in counts.items())
            logger.warning("%s: skipped %d invalid record(s): %s", config, len(errors), details)
    from .fiber.fiber import describe_dropped_answers

    for config, by_split in result.dropped_answers.items():
        if (dropped := describe_dropped_answers(by_split)) is not None:
            logger.warning("%s: dropped %s", config, dropped)
    logger.info("Wrote %s", result.output_dir)



def _built_files(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


def run(args: argparse.Namespace) -> int:
    """Build, report, and push when asked; errors are one line (see `fiberbench.errors`)."""
    from fiberbench.hub import HubPushError, check_can_push, push_folder

    from .fiber.validation import InvalidRecordError

    if args.push_to_hub:
        # A wrong repo id or a missing login fails now, not after the build.
        check_can_push(args.push_to_hub)
    try:
        result = build_dataset(
            _sources_from_args(args),
            args.output_dir,
            skip_invalid=args.skip_invalid,
            max_shard_size=args.max_shard_size,
            overwrite=args.overwrite_output_dir,
            repo_id=args.push_to_hub,
        )
    except InvalidRecordError as error:
        if error.index is None or args.skip_invalid:  # an error of a whole file: skipping cannot help
            raise
        hint = f"{error.problem} (pass --skip_invalid to skip invalid records)"
        raise InvalidRecordError(error.file, error.index, error.field, hint) from None
    _log_summary(result)
    if args.push_to_hub:
        try:
            url = push_folder(
                result.output_dir,
                args.push_to_hub,
                repo_type="dataset",
                private=args.hub_private_repo,
                commit_message="Upload FIBER built with `fiberbench build-dataset`",
                # The build's record names this machine's host and process: it stays here.
                paths=[path for path in _built_files(result.output_dir) if path != FOLDER_RECORD],
            )
        except HubPushError as error:
            raise HubPushError(f"Built {result.output_dir}, but the push failed: {error}") from error
        logger.info("Pushed to %s", url)
    return 0
