"""The dataset card (README.md) of a built FIBER folder, generated from the data it describes."""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from datasets import DatasetInfo
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from fiberbench import __version__

from ..provenance import BUILD_INFO_KEY, BUILT_BY
from .features_info import FeaturesInfo
from .fiber import Fiber, describe_dropped_answers

CARD_TEMPLATE_PATH = Path(__file__).parent / "card_template.md"


@dataclass(frozen=True)
class AnswerStatistics:
    """Means over a split's clips of the annotators, answers, and distinct answers (label included, case ignored)."""

    split: str
    clips: int
    annotators: float
    answers: float
    distinct_answers: float


def answer_statistics(split: str, parquet_files: list[Path]) -> tuple[AnswerStatistics, Counter]:
    """The split's answer statistics and its category counts, read from its built Parquet files."""
    table = pq.read_table(parquet_files, columns=["label", "additional_answers", "category"])
    annotators = answers = distinct = 0
    for label, per_annotator in zip(table["label"].to_pylist(), table["additional_answers"].to_pylist()):
        annotators += len(per_annotator)
        answers += sum(len(annotator_answers) for annotator_answers in per_annotator)
        distinct += len({label.lower(), *(answer.lower() for group in per_annotator for answer in group)})
    clips = max(table.num_rows, 1)
    statistics = AnswerStatistics(split, table.num_rows, annotators / clips, answers / clips, distinct / clips)
    categories = Counter(category for category in table["category"].to_pylist() if category is not None)
    return statistics, categories


def make_dataset_card(
    infos: dict[str, DatasetInfo],
    data_files: dict[str, dict[str, str]],
    text_parquet_files: dict[str, list[Path]],
    *,
    source: str,
    synthetic: bool,
    skipped: dict[str, int],
    dropped_answers: dict,
    repo_hint: str,
    features: dict[str, FeaturesInfo] | None = None,
) -> DatasetCard:
    """Render the card: YAML `configs` and `dataset_info` (so Array2D features survive), and prose.

    Args:
        infos: config name -> the builder's DatasetInfo after preparing (features, split sizes).
        data_files: config name -> split -> Parquet path pattern, relative to the folder.
        text_parquet_files: split -> the `text` config's Parquet files, for the answer statistics.
            The `text` config is always built; its info gives the description and citation.
        source: where the data came from, in words.
        synthetic: built from the bundled synthetic sample (the card says so everywhere).
        skipped: config name -> number of invalid records skipped.
        dropped_answers: split -> the `DroppedAnswers` of the `text` config (answers that normalize to nothing).
        repo_hint: how `load_dataset` names the folder in the card's example.
        features: config name -> the video features it adds (VaTeX's I3D, or an encoder's, whose
            `features.json` goes into the card's YAML under `fiberbench.video_features`).
    """
    features = features or {}
    card_data = DatasetCardData(
        pretty_name="FIBER (SYNTHETIC sample)" if synthetic else "FIBER",
        language=["en"],
        license="other",
        task_categories=["text-generation", "video-text-to-text"],
        tags=["video", "fill-in-the-blanks", "vatex"]
        + (["i3d"] if any(info.is_i3d for info in features.values()) else [])
        + (["synthetic"] if synthetic else []),
        source_datasets=["extended|vatex"],
        **{
            BUILD_INFO_KEY: {
                "built_by": BUILT_BY,
                "version": __version__,
                "synthetic": synthetic,
                "video_features": {config: info.to_json() for config, info in features.items()},
            }
        },
    )
    MetadataConfigs(
        {
            config: {
                "data_files": [{"split": split, "path": pattern} for split, pattern in split_patterns.items()],
                **({"default": True} if config == Fiber.DEFAULT_CONFIG_NAME else {}),
            }
            for config, split_patterns in data_files.items()
        }
    ).to_dataset_card_data(card_data)
    DatasetInfosDict(infos).to_dataset_card_data(card_data)

    info = infos[Fiber.DEFAULT_CONFIG_NAME]
    splits = list(info.splits)
    per_split = {split: answer_statistics(split, files) for split, files in text_parquet_files.items()}
    category_counts = {split: counts for split, (_, counts) in per_split.items() if counts}
    categories = None
    if category_counts:
        totals = sum(category_counts.values(), Counter())
        categories = {
            "splits": list(category_counts),
            "counts": {category: {split: category_counts[split][category] for split in category_counts}
                       for category, _ in totals.most_common()},
        }
    return DatasetCard.from_template(
        card_data,
        template_path=str(CARD_TEMPLATE_PATH),
        pretty_name=card_data.pretty_name,
        synthetic=synthetic,
        description=info.description.strip(),
        homepage=info.homepage,
        splits=splits,
        split_sizes={
            config: {split: config_info.splits[split].num_examples for split in splits}
            for config, config_info in infos.items()
        },
        repo_hint=repo_hint,
        answer_statistics=[statistics for statistics, _ in per_split.values()],
        categories=categories,
        source=source,
        skipped={config: count for config, count in skipped.items() if count},
        dropped_answers=describe_dropped_answers(dropped_answers),
        citation=info.citation.strip(),
        features=features,
    )
