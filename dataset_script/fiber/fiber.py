"""The row generator of `fiberbench build-dataset`: the release's JSON (and a features folder) to checked FIBER rows.

`Fiber` is a `datasets.GeneratorBasedBuilder` with configs `text`, `i3d` (or another encoder's
features): it reads the release files (downloaded, a local copy, or the bundled sample), checks
every record and yields one row per clip. `build.py` is its only caller: it instantiates the
builder and runs `download_and_prepare` into Parquet shards, which it moves with the dataset card
(`card.py`) into a Hub-native folder; the bundled sample is built the same way on first use
(`sample.py`). Users and commands load that folder (`load_dataset(folder)`, `fiberbench.data.
load_fiber`), never this file.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets

from fiberbench import CITATION
from fiberbench.errors import DataError
from fiberbench.metric import normalize_answer

from fiberbench.json_records import JsonRecordError, read_json_values
from .release import SPLIT_FILES
from fiberbench.records import (
    VIDEO_FEATURE_SIZE,
    ClipKey,
    InvalidRecordError,
    clip_key,
    feature_file_name,
    load_video_features,
    read_category_rows,
    validate_category_row,
    validate_record,
)

logger = datasets.logging.get_logger(__name__)


_DESCRIPTION = """\
FIBER is a video fill-in-the-blanks benchmark: given a ~10 s video and one of its English captions
with one noun phrase replaced by a blank `_____`, generate a phrase that fills the blank. Built from
VaTeX v1.1; every validation and test blank has many correct answers (the original phrase plus the
answers of about 9 crowd annotators).
"""

_HOMEPAGE = "https://lit.eecs.umich.edu/fiber/"

# An i3d row is ~128 KB (32 x 1024 float32): the writer keeps this many rows of a features config in
# memory before writing a Parquet row group, so memory stays flat in the number of clips.
I3D_WRITER_BATCH_SIZE = 64


def _read_values(source: str, path: str) -> Iterator[object]:
    """The values of a release JSON file, one at a time: memory does not grow with the file.

    A record that cannot be decoded comes as a `JsonRecordError` (see `read_json_values`); a file
    that cannot be read on, or that holds no record at all, is an `InvalidRecordError` of the file.
    """
    empty = True
    try:
        for value in read_json_values(path):
            empty = False
            yield value
    except DataError as error:
        raise InvalidRecordError(source, None, None, str(error).removeprefix(f"{path}: ")) from error
    if empty:
        raise InvalidRecordError(source, None, None, "holds no records (an empty file?)")


@dataclass
class DroppedAnswers:
    """Answers that normalize to nothing ("-", "the"), dropped from a split's `additional_answers`, counted.

    They are no answers, and an empty prediction (a clip `predict` skipped for its missing video)
    would match them; dropped, an empty prediction scores 0 on every blank. An annotator left with
    no answer is dropped too.
    """

    answers: int = 0
    annotators: int = 0

    def scorable(self, additional_answers: list[list[str]]) -> list[list[str]]:
        """`additional_answers` without the answers that normalize to nothing (counted)."""
        kept = []
        for answers in additional_answers:
            scorable = [answer for answer in answers if normalize_answer(answer)]
            self.answers += len(answers) - len(scorable)
            if scorable:
                kept.append(scorable)
            else:
                self.annotators += 1
        return kept


def describe_dropped_answers(by_split: dict[str, DroppedAnswers]) -> str | None:
    """"4 answers that normalize to nothing (test 4), and 2 annotators left without one", for the log and the
    card; None when none was dropped."""
    answers = sum(dropped.answers for dropped in by_split.values())
    if not answers:
        return None
    annotators = sum(dropped.annotators for dropped in by_split.values())
    splits = ", ".join(f"{split} {dropped.answers:,}" for split, dropped in by_split.items() if dropped.answers)
    left = f", and {annotators:,} annotators left without one" if annotators else ""
    return f"{answers:,} answers that normalize to nothing ({splits}){left}"


@dataclass
class FiberConfig(datasets.BuilderConfig):
    """BuilderConfig for FIBER.

    A config of another encoder's features (from `fiberbench extract-features`) is the `i3d` config
    given its own `name`, `description` and `feature_size` (datasets applies a builder's keyword
    arguments over the named config, its name included).

    Args:
        with_video_features: add `video_features`, the clip's features, float32 (T, `feature_size`).
        split_files: split name ("train", "validation", "test") -> path or URL of a release JSON file.
        category_files: split name -> path or URL of a tab-separated `video_id`/`category` file
            (the paper's Table 4 categories); splits without one get `category` None.
        features_dir: local folder of `{video_id}_{start:06d}_{end:06d}.npy` files of shape (1, T,
            `feature_size`), required by a features config.
        feature_size: D, the size of one feature vector (1024 for I3D).
        skip_invalid: skip (and count in `Fiber.invalid_records`) records that fail validation,
            instead of stopping at the first one.
    """

    with_video_features: bool = False
    split_files: dict[str, str] = field(default_factory=dict)
    category_files: dict[str, str] = field(default_factory=dict)
    features_dir: str | None = None
    feature_size: int = VIDEO_FEATURE_SIZE
    skip_invalid: bool = False


class Fiber(datasets.GeneratorBasedBuilder):
    """FIBER: one example per clip, its masked caption, its label and the annotators' answers."""

    BUILDER_CONFIG_CLASS = FiberConfig
    BUILDER_CONFIGS = [
        FiberConfig(name="text", description="Captions, blanks and answers."),
        FiberConfig(
            name="i3d",
            description="Captions, blanks and answers, plus each clip's I3D features (T, 1024).",
            with_video_features=True,
        ),
    ]
    DEFAULT_CONFIG_NAME = "text"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.config.with_video_features and not self.config.features_dir:
            raise ValueError(f"Config {self.config.name!r} needs `features_dir`, the folder of feature .npy files.")
        # Filled while generating when `skip_invalid` is set: the errors of the skipped records.
        self.invalid_records: list[InvalidRecordError] = []
        # Filled while generating: per split, the answers dropped as normalizing to nothing, and the
        # annotators left without an answer by it.
        self.dropped_answers: dict[str, DroppedAnswers] = {}

    def _info(self) -> datasets.DatasetInfo:
        features = {
            "video_id": datasets.Value("string"),
            "video_start_time": datasets.Value("int32"),
            "video_end_time": datasets.Value("int32"),
            "caption": datasets.Value("string"),
            "masked_caption": datasets.Value("string"),
            "label": datasets.Value("string"),
            "additional_answers": datasets.List(datasets.List(datasets.Value("string"))),
            "category": datasets.Value("string"),
        }
        if self.config.with_video_features:
            features["video_features"] = datasets.Array2D(shape=(None, self.config.feature_size), dtype="float32")
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            features=datasets.Features(features),
            homepage=_HOMEPAGE,
            citation=CITATION,
        )

    def _split_generators(self, dl_manager: datasets.DownloadManager) -> list[datasets.SplitGenerator]:
        missing = set(SPLIT_FILES) - set(self.config.split_files)
        if missing:
            raise ValueError(f"`split_files` lacks the split(s) {sorted(missing)}.")
        try:
            data_paths = dl_manager.download(self.config.split_files)
            category_paths = dl_manager.download(self.config.category_files)
        except OSError as error:  # datasets reports an unreachable URL as FileNotFoundError(url)
            raise ConnectionError(
                f"Could not get the data files ({error}). Without the internet, build the bundled sample "
                "or a local copy of the release instead."
            ) from error
        return [
            datasets.SplitGenerator(
                name=split,
                gen_kwargs={
                    "split": split,
                    "source": self.config.split_files[split],
                    "path": data_paths[split],
                    "category_source": self.config.category_files.get(split),
                    "category_path": category_paths.get(split),
                },
            )
            for split in SPLIT_FILES
        ]

    def _skip_or_raise(self, error: InvalidRecordError) -> None:
        if not self.config.skip_invalid:
            raise error
        logger.warning("Skipping an invalid record: %s", error)
        self.invalid_records.append(error)

    def _read_categories(self, source: str | None, path: str | None) -> dict[str, str]:
        """video_id -> category from a category file (none: an empty mapping)."""
        if path is None:
            return {}
        categories = {}
        for index, row in enumerate(read_category_rows(path, file=source)):
            try:
                video_id, category = validate_category_row(row, file=source, index=index)
            except InvalidRecordError as error:
                self._skip_or_raise(error)
                continue
            categories[video_id] = category
        return categories

    def _generate_examples(
        self, split: str, source: str, path: str, category_source: str | None, category_path: str | None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Validate each record, join its category and, for a features config, read its features (clip by clip).

        A clip is known by its id and times (predictions are joined to it by them): a second record
        of a clip already in the split is invalid. Answers that normalize to nothing are dropped and
        counted (`dropped_answers`).
        """
        categories = self._read_categories(category_source, category_path)
        features_dir = Path(self.config.features_dir) if self.config.with_video_features else None
        clips: dict[ClipKey, int] = {}
        dropped = self.dropped_answers.setdefault(split, DroppedAnswers())
        for index, record in enumerate(_read_values(source, path)):
            try:
                if isinstance(record, JsonRecordError):
                    raise InvalidRecordError(source, index, "(record)", record.problem)
                example = validate_record(record, file=source, index=index)
                first = clips.setdefault(clip_key(example), index)
                if first != index:
                    problem = f"the clip {clip_key(example)} is record {first} too: a split holds each clip once"
                    raise InvalidRecordError(source, index, "video_id", problem)
                example["additional_answers"] = dropped.scorable(example["additional_answers"])
                if features_dir is not None:
                    file_name = feature_file_name(
                        example["video_id"], example["video_start_time"], example["video_end_time"]
                    )
                    example["video_features"] = load_video_features(
                        features_dir / file_name, file=source, index=index, feature_size=self.config.feature_size
                    )
            except InvalidRecordError as error:
                self._skip_or_raise(error)
                continue
            example["category"] = categories.get(example["video_id"])
            yield index, example
