"""`fiberbench build-dataset`: run the FIBER builder and write a Hub-native Parquet dataset folder.

The folder holds `text/{split}-*.parquet`, one `{config}/{split}-*.parquet` per features folder
given (`i3d` for VaTeX's I3D, else the name in the folder's `features.json`, written by
`fiberbench extract-features`) and a README.md card whose YAML declares the configs and their
features, so `load_dataset(folder)` and `load_dataset(folder, "i3d")` read it and `--push_to_hub`
publishes it as it is.

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

from fiberbench.cli import add_output_arguments
from fiberbench.errors import DataError, UsageError, users_cause
from fiberbench.ownership import FOLDER_RECORD, Output

from .fiber.release import CATEGORY_FILES, RELEASE_CATEGORY_URLS, RELEASE_URLS, SAMPLE_DIR, SPLIT_FILES

if TYPE_CHECKING:
    from .fiber.features_info import FeaturesInfo
    from .fiber.fiber import DroppedAnswers, Fiber
    from fiberbench.records import InvalidRecordError

logger = logging.getLogger(__name__)

DEFAULT_MAX_SHARD_SIZE = "500MB"


@dataclass(frozen=True)
class Sources:
    """Where release-format data comes from: JSON files, optional category files and features folders."""

    split_files: dict[str, str]
    category_files: dict[str, str]
    features_dirs: tuple[str, ...]
    description: str
    synthetic: bool = False

    @classmethod
    def release(cls, *features_dirs: str | Path) -> "Sources":
        """The official release, downloaded from its URLs (needs the internet)."""
        return cls(
            dict(RELEASE_URLS),
            dict(RELEASE_CATEGORY_URLS),
            _absolute(features_dirs),
            "the official FIBER release files (https://lit.eecs.umich.edu/fiber/)",
        )

    @classmethod
    def sample(cls) -> "Sources":
        """The SYNTHETIC sample bundled with the package, with its features."""
        return cls.from_location(SAMPLE_DIR, SAMPLE_DIR / "i3d")

    @classmethod
    def from_location(cls, location: str | Path, *features_dirs: str | Path) -> "Sources":
        """A local folder, or a base URL, holding train.json, val.json and test.json; each of `features_dirs`
        a features config (see `read_features`).

        A local folder's category files (categories_val.tsv or val_label_categories.tsv, and the
        same for test) are used when present; a URL's are not looked for.
        """
        location = str(location)
        if location.startswith(("http://", "https://")):
            base = location.rstrip("/")
            split_files = {split: f"{base}/{name}" for split, name in SPLIT_FILES.items()}
            return cls(split_files, {}, _absolute(features_dirs), f"the files at {base}")
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
            _absolute(features_dirs),
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


def _absolute(paths: tuple[str | Path, ...]) -> tuple[str, ...]:
    return tuple(str(Path(path).absolute()) for path in paths)


def read_features(sources: Sources) -> dict[str, tuple["FeaturesInfo", str]]:
    """Config name -> the features of each features folder (`FeaturesInfo.read`) and the folder, checked before
    any work.

    Raises:
        DataError: a folder is missing or its `features.json` is damaged.
        UsageError: two folders would be the same config.
    """
    from .fiber.features_info import FeaturesInfo

    features = {}
    for features_dir in sources.features_dirs:
        if not Path(features_dir).is_dir():
            problem = "not a folder" if Path(features_dir).exists() else "no such folder"
            raise DataError(f"{features_dir}: {problem} (the video features folder)")
        info = FeaturesInfo.read(features_dir)
        if info.name in features:
            raise UsageError(
                f"--features_dir {features[info.name][1]} and {features_dir} are both the {info.name!r} config: give "
                "features of different encoders (or settings), or build them into different datasets"
            )
        features[info.name] = (info, features_dir)
    return features


@dataclass(frozen=True)
class BuildResult:
    """What a build wrote: the folder, rows per config and split, the records it skipped and, per config and
    split, the answers it dropped as normalizing to nothing."""

    output_dir: Path
    num_examples: dict[str, dict[str, int]]
    invalid_records: dict[str, list["InvalidRecordError"]]
    dropped_answers: dict[str, dict[str, "DroppedAnswers"]]


def _prepare(
    config: str,
    sources: Sources,
    work_dir: Path,
    *,
    features: "FeaturesInfo | None",
    features_dir: str | None,
    skip_invalid: bool,
    max_shard_size: str,
) -> "Fiber":
    """Run the builder for one config (`text`, or that of `features` read from `features_dir`) into
    `work_dir/prepared/<config>` as Parquet shards."""
    import datasets

    from .fiber.fiber import I3D_WRITER_BATCH_SIZE, Fiber

    video = {}
    if features is not None:
        video = {
            "features_dir": features_dir,
            "feature_size": features.feature_size,
            "writer_batch_size": I3D_WRITER_BATCH_SIZE,
        }
        if not features.is_i3d:  # the i3d config, renamed (see FiberConfig)
            clip_features = f"{features.describe()} (T, {features.feature_size})"
            video |= {"name": config, "description": f"Captions, blanks and answers, plus each clip's {clip_features}."}
    builder = Fiber(
        config_name="text" if features is None else "i3d",
        # A fresh cache inside the build: no earlier build's info can leak into this one.
        cache_dir=str(work_dir / "cache"),
        split_files=sources.split_files,
        category_files=sources.category_files,
        skip_invalid=skip_invalid,
        **video,
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


def dataset_output(output_dir: Path, sources: Sources, overwrite: bool) -> tuple[Output, list[Path]]:
    """The output folder and the local inputs it is kept apart from (`fiberbench.ownership.Output.open` checks it).

    Never an input (or a folder holding one), the current or the home directory; an existing
    folder is replaced only with `overwrite`, and only when `build-dataset` wrote it and it holds
    nothing else (a file a user put there would be lost with it).
    """
    local_inputs = [
        path
        for path in (*sources.split_files.values(), *sources.category_files.values(), *sources.features_dirs)
        if not str(path).startswith(("http://", "https://"))
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
    return output, local_inputs


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

    The `text` config is always built, and a config per features folder of `sources`: `i3d` for VaTeX's
    I3D, else the one its `features.json` names (see `fiber.features_info`). All
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
        DataError: a features folder does not exist, or its `features.json` is damaged.
        UsageError: `output_dir` may not be written (see `dataset_output`), another build is writing it,
            `max_shard_size` is not a size, or two features folders would be the same config.
        FileExistsError: another build published `output_dir` first.
    """
    from .fiber.card import make_dataset_card

    if not isinstance(sources, Sources):
        sources = Sources.from_location(sources)
    features = read_features(sources)
    _check_max_shard_size(max_shard_size)
    output, local_inputs = dataset_output(output_dir, sources, overwrite)
    output_dir = output.path
    with output.open(local_inputs), output.atomic_folder() as dataset_dir:
        # The builder's cache and prepared files, inside the staging folder so that a killed build
        # leaves one thing behind, which the next build of `output_dir` removes.
        work_dir = dataset_dir / ".build"
        infos, data_files, shards, invalid_records, dropped_answers = {}, {}, {}, {}, {}
        for config in ["text", *features]:
            builder = _prepare(
                config,
                sources,
                work_dir,
                features=features[config][0] if config in features else None,
                features_dir=features[config][1] if config in features else None,
                skip_invalid=skip_invalid,
                max_shard_size=max_shard_size,
            )
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
            features={config: info for config, (info, _) in features.items()},
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
        nargs="+",
        default=[],
        metavar="FEATURES_DIR",
        help="Folders of video features, {video_id}_{start:06d}_{end:06d}.npy of shape (1, T, D), each a config: "
        "VaTeX's I3D features (downloaded and extracted; D = 1024) the `i3d` config, a folder written by "
        "`fiberbench extract-features` the config its features.json names.",
    )
    add_output_arguments(
        parser,
        "Folder to write (default: ./fiber).",
        "Replace --output_dir if it exists.",
        folder=True,
        required=False,
        default=Path("fiber"),
    )
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
        return Sources.release(*args.features_dir)
    if args.data_dir is None and not args.features_dir:
        return Sources.sample()
    return Sources.from_location(args.data_dir or SAMPLE_DIR, *args.features_dir)


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

    from fiberbench.records import InvalidRecordError

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
