"""FIBER as a `datasets` builder: the release's JSON files (and a features folder) to checked rows, one per clip."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from fiberbench import CITATION
from fiberbench.errors import DataError
from fiberbench.json_records import JsonRecordError, read_json_values
from fiberbench.metric import normalize_answer
from fiberbench.records import VIDEO_FEATURE_SIZE, InvalidRecordError, clip_key, feature_file_name, load_video_features
from fiberbench.records import read_category_rows, validate_category_row, validate_record

from .release import SPLIT_FILES

logger = datasets.logging.get_logger(__name__)

_DESCRIPTION = """\
FIBER is a video fill-in-the-blanks benchmark: given a ~10 s video and one of its English captions
with one noun phrase replaced by a blank `_____`, generate a phrase that fills the blank. Built from
VaTeX v1.1; every validation and test blank has many correct answers (the original phrase plus the
answers of about 9 crowd annotators).
"""
_HOMEPAGE = "https://lit.eecs.umich.edu/fiber/"
# An i3d row is ~128 KB (32 x 1024 float32): the writer keeps this many rows of a features config in memory before
# it writes a Parquet row group, so that memory stays flat in the number of clips.
I3D_WRITER_BATCH_SIZE = 64


@dataclass
class DroppedAnswers:
    """The answers of a split that normalize to nothing ("-", "the"), and the annotators left with none, dropped
    from `additional_answers` and counted: they are no answers, and an empty prediction would match them."""

    answers: int = 0
    annotators: int = 0

    def scorable(self, additional_answers: list[list[str]]) -> list[list[str]]:
        kept = [[answer for answer in answers if normalize_answer(answer)] for answers in additional_answers]
        self.answers += sum(map(len, additional_answers)) - sum(map(len, kept))
        self.annotators += kept.count([])
        return [answers for answers in kept if answers]


def describe_dropped_answers(by_split: dict[str, DroppedAnswers]) -> str | None:
    """"4 answers that normalize to nothing (test 4), and 2 annotators left without one" (None when none was)."""
    answers = sum(dropped.answers for dropped in by_split.values())
    if not answers:
        return None
    annotators = sum(dropped.annotators for dropped in by_split.values())
    splits = ", ".join(f"{split} {dropped.answers:,}" for split, dropped in by_split.items() if dropped.answers)
    left = f", and {annotators:,} annotators left without one" if annotators else ""
    return f"{answers:,} answers that normalize to nothing ({splits}){left}"


@dataclass
class FiberConfig(datasets.BuilderConfig):
    """BuilderConfig for FIBER. Another encoder's features (`fiberbench extract-features`) are the `i3d` config given
    its own `name`, `description` and `feature_size` (a builder's keyword arguments apply over the named config).

    Args:
        with_video_features: add `video_features`, the clip's features, float32 (T, `feature_size`).
        split_files: split name ("train", "validation", "test") -> path or URL of a release JSON file.
        category_files: split name -> path or URL of a `video_id`/`category` TSV file (Table 4); else None.
        features_dir: the folder of `{video_id}_{start:06d}_{end:06d}.npy` files of shape (1, T, `feature_size`).
        feature_size: D, the size of one feature vector (1024 for I3D).
        skip_invalid: skip (and count in `Fiber.invalid_records`) invalid records instead of raising.
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
        FiberConfig(name="i3d", description="Captions, blanks and answers, plus each clip's I3D features (T, 1024).",
                    with_video_features=True),
    ]
    DEFAULT_CONFIG_NAME = "text"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Filled while generating: the records skipped (`skip_invalid`), and each split's answers dropped.
        self.invalid_records: list[InvalidRecordError] = []
        self.dropped_answers: dict[str, DroppedAnswers] = {}

    def _info(self) -> datasets.DatasetInfo:
        text, time = datasets.Value("string"), datasets.Value("int32")
        features = {"video_id": text, "video_start_time": time, "video_end_time": time, "caption": text,
                    "masked_caption": text, "label": text, "additional_answers": datasets.List(datasets.List(text)),
                    "category": text}
        if self.config.with_video_features:
            features["video_features"] = datasets.Array2D(shape=(None, self.config.feature_size), dtype="float32")
        return datasets.DatasetInfo(description=_DESCRIPTION, features=datasets.Features(features), homepage=_HOMEPAGE,
                                    citation=CITATION)

    def _split_generators(self, dl_manager: datasets.DownloadManager) -> list[datasets.SplitGenerator]:
        try:
            paths, category_paths = dl_manager.download((self.config.split_files, self.config.category_files))
        except OSError as error:  # datasets reports an unreachable URL as FileNotFoundError(url)
            raise ConnectionError(f"Could not get the data files ({error}). Without the internet, build the bundled "
                                  "sample or a local copy of the release instead.") from error
        sources = self.config.category_files
        return [
            datasets.SplitGenerator(split, gen_kwargs={
                "source": self.config.split_files[split], "path": paths[split], "split": split,
                "categories": self._read_categories(sources.get(split), category_paths.get(split)),
            })
            for split in SPLIT_FILES
        ]

    def _skip_or_raise(self, error: InvalidRecordError) -> None:
        if not self.config.skip_invalid:  # (an error of a whole file is raised as it is: skipping cannot help)
            hint = f"{error.problem} (pass --skip_invalid to skip invalid records)"
            raise InvalidRecordError(error.file, error.index, error.field, hint) from None
        logger.warning("Skipping an invalid record: %s", error)
        self.invalid_records.append(error)

    def _read_categories(self, source: str | None, path: str | None) -> dict[str, str]:
        """video_id -> category from a category file (none: an empty mapping)."""
        categories = {}
        for index, row in enumerate(read_category_rows(path, file=source) if path else []):
            try:
                video_id, category = validate_category_row(row, file=source, index=index)
                categories[video_id] = category
            except InvalidRecordError as error:
                self._skip_or_raise(error)
        return categories

    def _generate_examples(self, source: str, path: str, split: str, categories: dict[str, str]) -> Iterator:
        """Each record validated, its empty answers dropped, its category joined and its features read. A second record
        of a clip in a split is invalid; a file that cannot be read on, or holds no record, is an error of the file."""
        clips, dropped, index = {}, self.dropped_answers.setdefault(split, DroppedAnswers()), None
        try:
            for index, record in enumerate(read_json_values(path)):
                try:
                    if isinstance(record, JsonRecordError):
                        raise InvalidRecordError(source, index, "(record)", record.problem)
                    example = validate_record(record, file=source, index=index)
                    if (first := clips.setdefault(clip_key(example), index)) != index:
                        problem = f"the clip {clip_key(example)} is record {first} too: a split holds each clip once"
                        raise InvalidRecordError(source, index, "video_id", problem)
                    example["additional_answers"] = dropped.scorable(example["additional_answers"])
                    if self.config.with_video_features:
                        features_file = Path(self.config.features_dir) / feature_file_name(*clip_key(example))
                        example["video_features"] = load_video_features(features_file, file=source, index=index,
                                                                        feature_size=self.config.feature_size)
                except InvalidRecordError as error:
                    self._skip_or_raise(error)
                    continue
                yield index, example | {"category": categories.get(example["video_id"])}
        except InvalidRecordError:
            raise
        except DataError as error:  # named by the release's file, not by its copy in the download cache
            raise InvalidRecordError(source, None, None, str(error).removeprefix(f"{path}: ")) from error
        if index is None:
            raise InvalidRecordError(source, None, None, "holds no records (an empty file?)")
