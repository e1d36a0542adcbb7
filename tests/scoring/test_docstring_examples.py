"""The examples in the docstrings of the scoring and leaderboard modules run and give what they show."""

import doctest

from fiberbench.leaderboard.src import populate
from fiberbench.metric.evaluate import report


def test_docstring_examples_run():
    results = [doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE) for module in (report, populate)]
    assert sum(result.failed for result in results) == 0
    assert sum(result.attempted for result in results) >= 6  # markdown_text, p_value_text, system_colours, ranks, holm
