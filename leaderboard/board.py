"""The leaderboard's figures: every stored system scored by `fiberbench evaluate`'s own code, with rank intervals.

Nothing here scores: the predictions files are read by `fiberbench.predictions.read_rows` and joined to the split
by `fiberbench.metric.scoring.split.join_predictions`, and `fiberbench.metric.scoring.results.evaluate_systems` computes the means, their intervals, the
baselines and the pairwise comparisons, so the board's numbers are those that `fiberbench evaluate`
gives for the same files and settings. What evaluate does not give, the rank intervals and the
Holm-corrected p-values, comes from `ranks`.
"""

from dataclasses import dataclass
from pathlib import Path

from fiberbench.predictions import read_rows
from fiberbench.metric.scoring.results import evaluate_systems, score_columns
from fiberbench.metric.scoring.split import Split, System, join_predictions, load_split, read_splits

from fiberbench.leaderboard.ranks import holm, rank_intervals
from fiberbench.leaderboard.store import Entry

# What the systems are ranked by, as `fiberbench evaluate` orders them.
RANKED_BY = "f1"


@dataclass
class Benchmark:
    """The split the board scores against, loaded once: its blanks and answers stay on the server."""

    split: Split
    train_labels: list[str]
    dataset: dict  # results.json's "dataset" section
    settings: dict  # confidence_level, num_bootstrap, seed

    def __post_init__(self):
        self._keys = self.split.index()

    def join(self, path: Path, name: str) -> System:
        """A predictions file joined to the split as `fiberbench evaluate` joins it (a `DataError` names what is wrong)."""
        return join_predictions(path, read_rows(path), name, self.split, self._keys)

    def results(self, systems: list[System], with_baselines: bool) -> dict:
        """results.json as `fiberbench evaluate` writes it for these systems (with --with_baselines)."""
        return {
            "dataset": self.dataset,
            "settings": {**self.settings, "num_permutations": self.settings["num_bootstrap"]},
            **evaluate_systems(systems, self.split, self.settings, self.train_labels if with_baselines else None),
        }


def load_benchmark(dataset_name: str | None, config_name: str, split_name: str, settings: dict) -> Benchmark:
    """The split `split_name` of `dataset_name` (None: the bundled sample), with its human agreement and train labels."""
    from fiberbench.data.provenance import is_synthetic
    from fiberbench.errors import UsageError

    described = "the bundled sample" if dataset_name is None else dataset_name
    splits = read_splits(dataset_name, config_name)
    if "train" not in splits:
        raise UsageError(f"{described} has no train split: the board's most frequent answer baseline needs it")
    split = load_split(splits, split_name, described, with_human_agreement=True)
    dataset = {
        "name": dataset_name or "the bundled sample",
        "config": config_name,
        "split": split_name,
        "num_blanks": len(split),
        "synthetic": is_synthetic(dataset_name),
    }
    train_labels = splits["train"].column("label").to_pylist()
    return Benchmark(split, train_labels, dataset, dict(settings))


def compute_board(benchmark: Benchmark, entries: list[Entry]) -> dict:
    """The board of the stored `entries`: evaluate's results for all of them with the baselines, and per system its
    metadata and rank interval, and per comparison its Holm-corrected p-value (within the pairs of its metric)."""
    systems = [benchmark.join(entry.predictions, entry.metadata["system"]) for entry in entries]
    results = benchmark.results(systems, with_baselines=True)
    columns = {system.name: score_columns(system, benchmark.split)[RANKED_BY] for system in systems}
    comparisons = results["comparisons"]
    adjusted = [None] * len(comparisons)
    for metric in {comparison["metric"] for comparison in comparisons}:
        family = [index for index, comparison in enumerate(comparisons) if comparison["metric"] == metric]
        for index, p_value in zip(family, holm([comparisons[index]["p_value"] for index in family])):
            adjusted[index] = p_value
    return {
        "results": results,
        "metadata": {entry.metadata["system"]: entry.metadata for entry in entries},
        "rank_intervals": rank_intervals(columns, **benchmark.settings),
        "holm_p_values": adjusted,
    }
