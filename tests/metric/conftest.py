"""Fixtures of the metric tests: the metric module, loaded once per config with evaluate, and the Table 7 blanks."""

import evaluate
import pytest

from fiberbench.metric import METRIC_PATH


@pytest.fixture(scope="session")
def table_7_references() -> list[list[str]]:
    """The correct answers of the three blanks of the paper's Table 7 (Appendix B.4)."""
    return [
        ["adirondacks", "cliff", "climb", "frozen waterfall", "gully", "hill", "ice", "icy cliff", "ledge",
         "mountain", "ravine", "slope", "snow"],
        ["building", "doors", "entryway", "foyer", "his home", "his house", "home", "house", "living room", "room",
         "shorts", "t-shirt"],
        ["audience", "camera", "consider where its hinge goes", "describe how it looks", "discuss its hinge",
         "explain his viewers", "his audience", "his followers", "his subscribers", "his viewers", "people",
         "students", "viewer", "viewers"],
    ]


@pytest.fixture(scope="module")
def agreement_metric():
    return evaluate.load(str(METRIC_PATH), "human_agreement", keep_in_memory=True)
