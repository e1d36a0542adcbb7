"""One citation: the metric's module, its card, the dataset builder and the README cite the paper as fiberbench does."""

import re
from pathlib import Path

from fiberbench import CITATION
from fiberbench.data.fiber.fiber import Fiber
from fiberbench.metric import METRIC_PATH

from .processes import modules_loaded

ROOT = Path(__file__).resolve().parents[1]


def bibtex_blocks(markdown: str) -> list[str]:
    return re.findall(r"```bibtex\n(.*?)```", markdown, flags=re.DOTALL)


def test_the_metric_module_cites_the_one_entry():
    from fiberbench.metric.fiber_metric import fiber_metric

    assert fiber_metric._CITATION is CITATION
    assert "@inproceedings{castro-etal-2022-fiber," in CITATION


def test_importing_fiberbench_for_its_citation_stays_light():
    assert modules_loaded("import fiberbench", ["evaluate", "datasets", "torch"])[0] == []


def test_the_cards_and_the_readme_cite_the_same_entry():
    for card in (METRIC_PATH / "README.md", ROOT / "README.md"):
        assert bibtex_blocks(card.read_text(encoding="utf-8")) == [CITATION], card


def test_the_dataset_builder_cites_it():
    assert Fiber(config_name="text").info.citation == CITATION
