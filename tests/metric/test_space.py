"""The metric's Space for real: app.py started with the real Gradio in a copy of its folder, queried by gradio_client."""

import contextlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fiberbench.metric import METRIC_PATH, score_predictions

# The Space runs in a process of its own: this one needs gradio installed, not imported (a second of CPU in each
# test process that collects this module).
if importlib.util.find_spec("gradio") is None:
    pytest.skip("the Space needs the `test` extra's gradio", allow_module_level=True)
from gradio_client import Client  # noqa: E402

# One worker starts the Space (pyproject.toml's --dist loadgroup).
pytestmark = pytest.mark.xdist_group("metric_space")


ROWS = [
    ["a mountain", "adirondacks | cliff | mountain"],
    ["icy mountain", "mountain | icy cliff"],
    ["The house!", "house | home"],
    ["a gym", "room | living room"],
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serving(folder: Path, env: dict, log: Path, timeout: float):
    """`python app.py` in a Space folder, as the Hub runs it, until the block ends: the URL it says it runs on (the port
    of `env`'s GRADIO_SERVER_PORT, or the next free one, where Gradio goes if another process took that one since); a
    test fails with the app's log if it does not say it is running within `timeout` seconds."""
    with open(log, "w") as output:
        app = subprocess.Popen([sys.executable, "app.py"], cwd=folder, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not (running := re.search(r"Running on local URL:\s+(http://\S+?)/?\s", log.read_text())):
            if app.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"app.py did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield f"{running[1]}/"
    finally:
        app.terminate()
        app.wait(timeout=30)


@pytest.fixture(scope="module")
def space_url(tmp_path_factory):
    """`python app.py` in a copy of the metric folder, as a Space runs it, on a free local port.

    A Space is cloned under its own name, not fiber_metric: app.py must find the module beside it.
    """
    space = tmp_path_factory.mktemp("clone") / "space"
    shutil.copytree(METRIC_PATH, space, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(free_port()),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    with serving(space, env, tmp_path_factory.mktemp("space") / "app.log", timeout=120) as url:
        yield url


def test_the_space_scores_like_the_metric(space_url):
    client = Client(space_url, verbose=False)
    result = client.predict({"headers": ["prediction", "correct answers"], "data": ROWS}, api_name="/score")
    expected = score_predictions(
        [prediction for prediction, _ in ROWS],
        [[answer.strip() for answer in answers.split("|")] for _, answers in ROWS],
        per_example=True,
    )
    assert result == expected
    assert result["exact_match"] == 50.0


def score_in_space(space_url, rows, headers=("prediction", "correct answers")):
    return Client(space_url, verbose=False).predict({"headers": list(headers), "data": rows}, api_name="/score")


@pytest.mark.parametrize(("rows", "exact_matches"), [
    ([["", "dog |"]], [0.0]),  # a trailing separator is no empty answer to match
    ([["", "| dog"], ["dog", "cat||dog"]], [0.0, 100.0]),
    ([[None, "none"]], [0.0]),  # a null prediction is an empty answer, not the text "None"
])
def test_empty_pieces_and_null_cells_are_no_answers(space_url, rows, exact_matches):
    assert score_in_space(space_url, rows)["exact_match_per_example"] == exact_matches


@pytest.mark.parametrize(("rows", "headers", "message"), [
    ([["The!", ""]], None, r"Row 1 has no correct answers"),
    ([["dog", "cat"], ["dog", None]], None, r"Row 2 has no correct answers"),  # not the answer "None"
    ([["dog", " | "]], None, r"Row 1 has no correct answers"),
    ([["dog", "dog", "extra"]], ("prediction", "correct answers", "more"), r"3 columns"),
    ([["dog", "dog"]] * 1001, None, r"1,001 rows: the page scores at most 1,000"),
])
def test_a_table_that_cannot_be_scored_says_why_on_the_page(space_url, rows, headers, message):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=message):
        score_in_space(space_url, rows, *([headers] if headers else []))
