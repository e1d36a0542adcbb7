"""`fiberbench build-dataset`: run the FIBER builder into a Hub-native folder of Parquet shards and a dataset card.

`text/{split}-*.parquet`, one `{config}/{split}-*.parquet` per features folder and a README.md whose YAML declares
the configs: `load_dataset(folder, config)` reads it, and `--push_to_hub` publishes it as it is.
"""

import argparse
import errno
import logging
import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import datasets
import pyarrow.parquet as pq
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from datasets.utils.py_utils import convert_file_size_to_int
from huggingface_hub import DatasetCard, DatasetCardData

from fiberbench import __version__
from fiberbench.cli import add_output_arguments, arguments_of
from fiberbench.errors import DataError, UsageError, users_cause
from fiberbench.hub import HubPushError, check_can_push, push_folder
from fiberbench.outputs import FOLDER_RECORD, atomic_folder, check_output, finish_output, output_lock, start_output

from .fiber.features_info import FeaturesInfo
from .fiber.fiber import I3D_WRITER_BATCH_SIZE, Fiber, describe_dropped_answers
from .fiber.release import CATEGORY_FILES, RELEASE_CATEGORY_URLS, RELEASE_URLS, SAMPLE_DIR, SPLIT_FILES
from .provenance import BUILD_INFO_KEY, BUILT_BY, sample_file_name

logger = logging.getLogger(__name__)

COMMAND = "fiberbench build-dataset"
DEFAULT_MAX_SHARD_SIZE = "500MB"
CARD_TEMPLATE_PATH = Path(__file__).parent / "fiber" / "card_template.md"


@dataclass(frozen=True)
class Sources:
    """Where release-format data comes from: JSON files, category files and features folders, in words."""

    split_files: dict[str, str]
    category_files: dict[str, str]
    features_dirs: tuple[str, ...] = ()
    description: str = "the official FIBER release files (https://lit.eecs.umich.edu/fiber/)"
    synthetic: bool = False

    @classmethod
    def from_location(cls, location: str | Path, *features_dirs: str | Path) -> "Sources":
        """A local folder of the release's files and `features_dirs`; SYNTHETIC if its split files are the sample's."""
        folder = Path(location).absolute()
        if missing := [name for name in SPLIT_FILES.values() if not (folder / name).is_file()]:
            raise FileNotFoundError(f"{folder}: no {', '.join(missing)} (expected the release's train/val/test JSON)")
        synthetic = all(sample_file_name(folder / name) == name for name in SPLIT_FILES.values())
        description = f"the local folder `{folder.name}`" + (", a copy of the bundled SYNTHETIC sample" * synthetic)
        if folder.resolve() == SAMPLE_DIR.resolve():
            description = "the bundled SYNTHETIC sample"
        categories = {split: str(path) for split, names in CATEGORY_FILES.items()
                      if (path := next((folder / name for name in names if (folder / name).is_file()), None))}
        split_files = {split: str(folder / name) for split, name in SPLIT_FILES.items()}
        return cls(split_files, categories, tuple(str(Path(path).absolute()) for path in features_dirs), description,
                   synthetic)


def read_features(sources: Sources) -> dict[str, tuple[FeaturesInfo, str]]:
    """Config name -> the features of each features folder (`FeaturesInfo.read`) and the folder, checked first."""
    features = {}
    for features_dir in sources.features_dirs:
        if not Path(features_dir).is_dir():
            problem = "not a folder" if Path(features_dir).exists() else "no such folder"
            raise DataError(f"{features_dir}: {problem} (the video features folder)")
        info = FeaturesInfo.read(features_dir)
        if info.name in features:
            raise UsageError(f"--features_dir {features[info.name][1]} and {features_dir} are both the {info.name!r} "
                             "config: give features of different encoders (or settings), or build them into different "
                             "datasets")
        features[info.name] = (info, features_dir)
    return features


def _prepare(config: str, sources: Sources, staging: Path, features: tuple | None, skip_invalid: bool,
             max_shard_size: str) -> Fiber:
    """Run the builder for one config and move its Parquet shards into `staging/{config}/{split}-i-of-n.parquet`."""
    video = {}
    if features is not None:
        info, features_dir = features
        video = {"features_dir": features_dir, "feature_size": info.feature_size,
                 "writer_batch_size": I3D_WRITER_BATCH_SIZE}
        if not info.is_i3d:  # the i3d config, renamed (see FiberConfig)
            clip_features = f"{info.describe()} (T, {info.feature_size})"
            video |= {"name": config, "description": f"Captions, blanks and answers, plus each clip's {clip_features}."}
    work_dir = staging / ".build"  # the builder's cache and shards: a fresh cache, no earlier build's info in it
    builder = Fiber(config_name="text" if features is None else "i3d", cache_dir=str(work_dir / "cache"),
                    split_files=sources.split_files, category_files=sources.category_files, skip_invalid=skip_invalid,
                    **video)
    logger.info("Building the %r config from %s", config, sources.description)
    try:
        # Downloads go to the shared cache, so that a rebuild does not fetch the release again.
        download_config = datasets.DownloadConfig(cache_dir=datasets.config.DOWNLOADED_DATASETS_PATH)
        builder.download_and_prepare(str(work_dir / config), download_config=download_config, file_format="parquet",
                                     max_shard_size=max_shard_size)
    except datasets.exceptions.DatasetGenerationError as error:  # the invalid record, or full disk, behind it
        raise users_cause(error) or error from None
    (staging / config).mkdir()
    for split in builder.info.splits:
        files = sorted((work_dir / config).glob(f"{builder.dataset_name}-{split}*.parquet"))
        for index, source in enumerate(files):
            os.replace(source, staging / config / f"{split}-{index:05d}-of-{len(files):05d}.parquet")
    # On the Hub, `download_size` is what a user downloads: this config's Parquet files.
    builder.info.download_size = sum(path.stat().st_size for path in (staging / config).iterdir())
    return builder


def card_statistics(split: str, parquet_files: list[Path]) -> tuple[dict, Counter]:
    """The means over a split's clips of the annotators, answers and distinct answers (label included, case
    ignored), and the split's category counts, read from its built Parquet files."""
    table = pq.read_table(parquet_files, columns=["label", "additional_answers", "category"])
    annotators = answers = distinct = 0
    for label, per_annotator in zip(table["label"].to_pylist(), table["additional_answers"].to_pylist()):
        annotators += len(per_annotator)
        answers += sum(map(len, per_annotator))
        distinct += len({label.lower(), *(answer.lower() for group in per_annotator for answer in group)})
    clips = max(table.num_rows, 1)
    means = {"annotators": annotators / clips, "answers": answers / clips, "distinct_answers": distinct / clips}
    categories = Counter(category for category in table["category"].to_pylist() if category is not None)
    return {"split": split, "clips": table.num_rows, **means}, categories


def make_dataset_card(builders: dict[str, Fiber], folder: Path, sources: Sources, repo_hint: str,
                      features: dict[str, FeaturesInfo]) -> DatasetCard:
    """The card of the configs `builders` built into `folder`: YAML `configs`, `dataset_info` (so that Array2D features
    survive) and each features config's `features.json`; prose from `card_template.md`."""
    infos = {config: builder.info for config, builder in builders.items()}
    synthetic = sources.synthetic
    build_info = {"built_by": BUILT_BY, "version": __version__, "synthetic": synthetic,
                  "video_features": {config: info.to_json() for config, info in features.items()}}
    card_data = DatasetCardData(
        pretty_name="FIBER (SYNTHETIC sample)" if synthetic else "FIBER", language=["en"], license="other",
        task_categories=["text-generation", "video-text-to-text"], source_datasets=["extended|vatex"],
        tags=["video", "fill-in-the-blanks", "vatex"] + ["i3d"] * any(info.is_i3d for info in features.values())
        + ["synthetic"] * synthetic,
        **{BUILD_INFO_KEY: build_info},
    )
    MetadataConfigs({
        config: {"data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"} for split in info.splits],
                 **({"default": True} if config == Fiber.DEFAULT_CONFIG_NAME else {})}
        for config, info in infos.items()
    }).to_dataset_card_data(card_data)
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    info = infos[Fiber.DEFAULT_CONFIG_NAME]
    per_split = [card_statistics(split, sorted(folder.glob(f"text/{split}-*"))) for split in info.splits]
    by_split = {row["split"]: counts for row, counts in per_split if counts}
    categories = {
        "splits": list(by_split),
        "counts": {category: {split: counts[category] for split, counts in by_split.items()}
                   for category, _ in sum(by_split.values(), Counter()).most_common()},
    }
    return DatasetCard.from_template(
        card_data, template_path=str(CARD_TEMPLATE_PATH), pretty_name=card_data.pretty_name, synthetic=synthetic,
        description=info.description.strip(), homepage=info.homepage, splits=list(info.splits),
        split_sizes={config: {split: size.num_examples for split, size in config_info.splits.items()}
                     for config, config_info in infos.items()},
        repo_hint=repo_hint, answer_statistics=[row for row, _ in per_split], categories=by_split and categories,
        source=sources.description, citation=info.citation.strip(), features=features,
        skipped={config: len(errors) for config, builder in builders.items() if (errors := builder.invalid_records)},
        dropped_answers=describe_dropped_answers(builders[Fiber.DEFAULT_CONFIG_NAME].dropped_answers),
    )


def build_dataset(
    sources: Sources | str | Path, output_dir: str | Path, *, skip_invalid: bool = False,
    max_shard_size: str = DEFAULT_MAX_SHARD_SIZE, overwrite: bool = False, arguments: dict | None = None,
    repo_id: str | None = None,
) -> dict[str, Fiber]:
    """Build data in the release format (`sources`, or a folder) into the Hub-native folder `output_dir`: the `text`
    config and one per features folder; returns each config's builder. A failed or killed build leaves no output, or the
    previous one whole; `overwrite` replaces only a folder `build-dataset` wrote. `repo_id` is named in the card."""
    if not isinstance(sources, Sources):
        sources = Sources.from_location(sources)
    features = read_features(sources)
    try:
        valid = convert_file_size_to_int(max_shard_size) > 0
    except ValueError:
        valid = False
    if not valid:
        raise UsageError(f"--max_shard_size {max_shard_size!r}: expected a positive size such as 500MB")
    output_dir = Path(output_dir).expanduser().absolute()
    builders = {}
    with output_lock(output_dir, "--output_dir"):
        inputs = [path for path in (*sources.split_files.values(), *sources.features_dirs) if "://" not in path]
        check_output(output_dir, command=COMMAND, flag="--output_dir", overwrite=overwrite, folder=True, inputs=inputs)
        try:
            with atomic_folder(output_dir) as staging:
                record = start_output(staging, COMMAND, None, folder=True, arguments=arguments or {})
                for config in ["text", *features]:
                    builders[config] = _prepare(config, sources, staging, features.get(config), skip_invalid,
                                                max_shard_size)
                features_info = {name: info for name, (info, _) in features.items()}
                card = make_dataset_card(builders, staging, sources, repo_id or output_dir.name, features_info)
                card.save(staging / "README.md")
                shutil.rmtree(staging / ".build")
                finish_output(staging, record)
        except OSError as error:
            if error.errno == errno.ENOSPC:  # named by the output the user gave, not a staging file
                raise OSError(error.errno, error.strerror, str(output_dir)) from error
            raise
    return builders


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data_dir", help="Folder with train.json, val.json, test.json (and categories_val.tsv, "
                        "categories_test.tsv). Default: the bundled SYNTHETIC sample, with its features.")
    source.add_argument("--release", action="store_true",
                        help="Download the official FIBER release (JSON and category files).")
    parser.add_argument("--features_dir", type=Path, nargs="+", default=[], help="Folders of video features, "
                        "{video_id}_{start:06d}_{end:06d}.npy of shape (1, T, D), each a config: VaTeX's I3D features "
                        "(D = 1024) the `i3d` config, a folder written by `fiberbench extract-features` the config its "
                        "features.json names.")
    add_output_arguments(parser, "Folder to write (default: ./fiber).",
                         "Replace --output_dir if build-dataset wrote it.", folder=True, required=False,
                         default=Path("fiber"))
    parser.add_argument("--skip_invalid", action="store_true", help="Skip (and count) invalid records.")
    parser.add_argument("--max_shard_size", default=DEFAULT_MAX_SHARD_SIZE, help="Largest Parquet shard.")
    parser.add_argument("--push_to_hub", metavar="REPO_ID", help="Push the built folder to this Hub dataset repo.")
    parser.add_argument("--hub_private_repo", action="store_true", help="Create the Hub repo as private.")


def run(args: argparse.Namespace) -> int:
    if args.push_to_hub:
        check_can_push(args.push_to_hub)  # a wrong repo id or a missing login fails now, not after the build
    if args.release:
        features_dirs = tuple(str(path.absolute()) for path in args.features_dir)
        sources = Sources(dict(RELEASE_URLS), dict(RELEASE_CATEGORY_URLS), features_dirs)
    elif args.data_dir is None and not args.features_dir:
        sources = Sources.from_location(SAMPLE_DIR, SAMPLE_DIR / "i3d")
    else:
        sources = Sources.from_location(args.data_dir or SAMPLE_DIR, *args.features_dir)
    if not sys.stderr.isatty():  # a log file gets these lines, not the fragments of a progress bar
        datasets.disable_progress_bars()
    builders = build_dataset(sources, args.output_dir, skip_invalid=args.skip_invalid,
                             max_shard_size=args.max_shard_size, overwrite=args.overwrite_output_dir,
                             repo_id=args.push_to_hub, arguments=arguments_of(args))
    for config, builder in builders.items():
        logger.info("%s: %s", config, ", ".join(f"{split} {info.num_examples:,}"
                                                 for split, info in builder.info.splits.items()))
        if errors := builder.invalid_records:
            counts = Counter((error.file, error.field) for error in errors)
            details = "; ".join(f"{count} in {file} ({field})" for (file, field), count in counts.items())
            logger.warning("%s: skipped %d invalid record(s): %s", config, len(errors), details)
    if dropped := describe_dropped_answers(builders["text"].dropped_answers):
        logger.warning("text: dropped %s", dropped)
    logger.info("Wrote %s", args.output_dir)
    if args.push_to_hub:
        # The build's record names this machine's host and process: it stays here.
        files = [path for path in sorted(args.output_dir.rglob("*")) if path.is_file() and path.name != FOLDER_RECORD]
        try:
            url = push_folder(args.output_dir, args.push_to_hub, repo_type="dataset", private=args.hub_private_repo,
                              commit_message="Upload FIBER built with `fiberbench build-dataset`",
                              paths=[path.relative_to(args.output_dir).as_posix() for path in files])
        except HubPushError as error:
            raise HubPushError(f"Built {args.output_dir}, but the push failed: {error}") from error
        logger.info("Pushed to %s", url)
    return 0
