"""The examples in the docstrings of the scoring modules run and give what they show."""

import doctest

import pytest

from fiberbench import predictions
from fiberbench.metric.scoring import figure, report, results, split


@pytest.mark.parametrize("module", [predictions, split, results, report, figure], ids=lambda module: module.__name__)
def test_docstring_examples_run(module):
    assert doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


def test_there_are_examples_to_run():
    attempted = sum(doctest.testmod(module).attempted for module in (report, figure))
    assert attempted >= 3  # markdown_text, p_value_text, system_colours
