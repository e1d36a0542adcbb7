"""One citation: the metric's self-contained copy, its card, the dataset builder and the README cite the paper as fiberbench does."""

import re
from pathlib import Path

from fiberbench import CITATION
from fiberbench.data.fiber.fiber import Fiber
from fiberbench.metric import METRIC_PATH

ROOT = Path(__file__).resolve().parents[1]


def bibtex_blocks(markdown: str) -> list[str]:
    return re.findall(r"```bibtex\n(.*?)```", markdown, flags=re.DOTALL)


def test_the_metric_module_keeps_an_equal_copy():
    source = (METRIC_PATH / "fiber_metric.py").read_text(encoding="utf-8")
    copy = re.search(r'_CITATION = """\\\n(.*?)"""', source, flags=re.DOTALL)[1]
    assert copy == CITATION


def test_the_cards_and_the_readme_cite_the_same_entry():
    for card in (METRIC_PATH / "README.md", ROOT / "README.md"):
        assert bibtex_blocks(card.read_text(encoding="utf-8")) == [CITATION], card


def test_the_dataset_builder_cites_it():
    assert Fiber(config_name="text").info.citation == CITATION
