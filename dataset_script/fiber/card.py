"""The dataset card (README.md) of a built FIBER folder, generated from the data it describes (card_template.md)."""

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from fiberbench import __version__

from ..provenance import BUILD_INFO_KEY, BUILT_BY
from .features_info import FeaturesInfo
from .fiber import Fiber, describe_dropped_answers

CARD_TEMPLATE_PATH = Path(__file__).parent / "card_template.md"


def answer_statistics(split: str, parquet_files: list[Path]) -> tuple[dict, Counter]:
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


def make_dataset_card(
    builders: dict[str, Fiber], folder: Path, *, source: str, synthetic: bool, repo_hint: str,
    features: dict[str, FeaturesInfo],
) -> DatasetCard:
    """The card of the configs `builders` built into `folder` (`{config}/{split}-*.parquet`): YAML `configs` (`text`
    the default) and `dataset_info` (so that Array2D features survive), and prose: where the data came from
    (`source`, SYNTHETIC everywhere when `synthetic`), `repo_hint` in its `load_dataset` example, and for each config
    of `features` the video features it adds (their `features.json` in the YAML)."""
    infos = {config: builder.info for config, builder in builders.items()}
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
                "data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"} for split in info.splits],
                **({"default": True} if config == Fiber.DEFAULT_CONFIG_NAME else {}),
            }
            for config, info in infos.items()
        }
    ).to_dataset_card_data(card_data)
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    info = infos[Fiber.DEFAULT_CONFIG_NAME]
    per_split = [answer_statistics(split, sorted(folder.glob(f"text/{split}-*"))) for split in info.splits]
    category_counts = {row["split"]: counts for row, counts in per_split if counts}
    categories = None
    if category_counts:
        totals = sum(category_counts.values(), Counter())
        by_category = {
            category: {split: counts[category] for split, counts in category_counts.items()}
            for category, _ in totals.most_common()
        }
        categories = {"splits": list(category_counts), "counts": by_category}
    return DatasetCard.from_template(
        card_data,
        template_path=str(CARD_TEMPLATE_PATH),
        pretty_name=card_data.pretty_name,
        synthetic=synthetic,
        description=info.description.strip(),
        homepage=info.homepage,
        splits=list(info.splits),
        split_sizes={
            config: {split: size.num_examples for split, size in config_info.splits.items()}
            for config, config_info in infos.items()
        },
        repo_hint=repo_hint,
        answer_statistics=[row for row, _ in per_split],
        categories=categories,
        source=source,
        skipped={config: len(errors) for config, builder in builders.items() if (errors := builder.invalid_records)},
        dropped_answers=describe_dropped_answers(builders[Fiber.DEFAULT_CONFIG_NAME].dropped_answers),
        citation=info.citation.strip(),
        features=features,
    )
