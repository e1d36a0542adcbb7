"""The evaluate module: loading from its folder and from a copy, batches, input checks, the doctests (the scoring's and
the leaderboard's too) and the card."""

import doctest
import json
import os
import shutil
import subprocess
import sys

import evaluate
import pytest

from fiberbench.metric import METRIC_PATH, score_predictions
from fiberbench.metric.fiber_metric import fiber_metric as metric_module
from fiberbench.metric.evaluate import report
from fiberbench.metric.fiber_metric import agreement, scores, statistics

from ..processes import modules_loaded

REPO_ROOT = METRIC_PATH.parents[1]
# Run in a fresh interpreter: loads each folder path given, scores, and says whether the project was imported.
LOAD_AND_SCORE = """
import json, sys
import evaluate
outputs = []
for path in sys.argv[1:]:
    metric = evaluate.load(path)
    agreement = evaluate.load(path, "human_agreement")
    outputs.append({
        "scores": metric.compute(predictions=["a mountain", "The gym!"], references=[["mountain", "hill"], ["room"]]),
        "agreement": agreement.compute(labels=["x"], additional_answers=[[["x"], ["y"]]])["num_first_answers"],
    })
imported = any(name.startswith("fiberbench") for name in sys.modules)
print(json.dumps({"outputs": outputs, "project_imported": imported}))
"""


@pytest.mark.slow
def test_loads_in_a_fresh_process_from_the_repository_and_from_a_copy(tmp_path):
    copy = tmp_path / "elsewhere" / "fiber_metric"
    shutil.copytree(METRIC_PATH, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_EVALUATE_OFFLINE": "1"}
    completed = subprocess.run([sys.executable, "-c", LOAD_AND_SCORE, "metric/fiber_metric", str(copy)],
                               cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    output = json.loads(completed.stdout.strip().splitlines()[-1])
    expected = {"scores": {"exact_match": 50.0, "f1": 50.0, "f1_release": 33.333333333333336}, "agreement": 2}
    assert output == {"outputs": [expected, expected], "project_imported": False}


def test_the_plain_functions_load_without_evaluate_and_datasets():
    # `fiberbench evaluate` scores through them: importing `evaluate` costs seconds (it imports
    # transformers' pipelines, hence torch) and the command never needs it.
    code = "from fiberbench.metric import score_predictions, human_agreement; score_predictions(['a dog'], [['dog']])"
    assert modules_loaded(code, ["evaluate", "datasets", "torch"])[0] == []


def test_add_batch_then_compute_equals_one_compute(fiber_metric, table_7_references):
    predictions = ["a mountain", "a room", "viewers!", "a tree", "The!"]
    references = [*table_7_references, ["tree", "forest"], "the"]
    kwargs = {"per_example": True, "categories": ["Location", "Location", "Person", "Object", "Object"],
              "candidates": [["a hill", "mountain"], ["room"], [], ["bush", "Tree", "a tree"], ["The!"]]}
    at_once = fiber_metric.compute(predictions=predictions, references=references, **kwargs)
    fiber_metric.add_batch(predictions=predictions[:2], references=references[:2])
    fiber_metric.add_batch(predictions=predictions[2:], references=references[2:])
    assert fiber_metric.compute(**kwargs) == at_once
    for prediction, answers in zip(predictions, references):
        fiber_metric.add(prediction=prediction, reference=answers)
    assert fiber_metric.compute(**kwargs) == at_once
    assert at_once == score_predictions(predictions, references, **kwargs)


GOOD = {"predictions": ["a dog", "a cat"], "references": [["dog"], ["cat", "kitten"]]}
GOOD_SCORES = {"exact_match": 100.0, "f1": 100.0, "f1_release": 200 / 3}  # "a dog" against "dog": 2 * 1 / (2 + 1)

# name -> (inputs of compute, the message it must raise)
DEFAULT_CASES = {
    "predictions not a list": ({"predictions": "a dog"}, r"predictions must be a list, got str"),
    "a number as prediction": ({"predictions": ["a dog", 3]}, r"predictions\[1\] must be a string, got int: 3"),
    "None as prediction": ({"predictions": [None, "a cat"]}, r"predictions\[0\] must be a string, got NoneType"),
    "a list as prediction": ({"predictions": [["a dog"], "a cat"]}, r"predictions\[0\] must be a string, got list"),
    "bytes as prediction": ({"predictions": [b"a dog", "a cat"]}, r"predictions\[0\] must be a string, got bytes"),
    "NaN as prediction": ({"predictions": ["a dog", float("nan")]}, r"predictions\[1\] must be a string, got float"),
    "fewer references": ({"references": [["dog"]]}, r"differ in length \(2 != 1\): references\[1\] is missing"),
    "fewer predictions": ({"predictions": ["a dog"]}, r"differ in length \(1 != 2\): predictions\[1\] is missing"),
    "a blank without answers": ({"references": [["dog"], []]}, r"references\[1\] is empty"),
    "a number among answers": (
        {"references": [["dog"], ["cat", 7]]},
        r"references\[1\]\[1\] must be a string, got int",
    ),
    "None as a blank's answers": ({"references": [["dog"], None]}, r"references\[1\] must be a list, got NoneType"),
    "a dict as a blank's answers": ({"references": [{"a": 1}, ["cat"]]}, r"references\[0\] must be a list, got dict"),
    "categories too short": ({"categories": ["Person"]}, r"categories\[1\] is missing"),
    "a number as category": ({"categories": ["Person", 2]}, r"categories\[1\] must be a string, got int"),
    "candidates not lists": ({"candidates": ["a dog", ["cat"]]}, r"candidates\[0\] must be a list, got str"),
    "a number among candidates": ({"candidates": [["dog"], ["cat", 1]]}, r"candidates\[1\]\[1\] must be a string"),
    "confidence level above 1": ({"confidence_level": 1.5}, r"confidence_level must be between 0 and 1"),
    "confidence level as text": ({"confidence_level": "95%"}, r"confidence_level must be a number"),
    "no resamples": ({"confidence_level": 0.95, "num_bootstrap": 0}, r"num_bootstrap must be a positive whole number"),
    "labels too short": ({"labels": ["dog"]}, r"labels\[1\] is missing"),
    "a list as a label": ({"labels": [["dog"], "cat"]}, r"labels\[0\] must be a string, got list"),
    "annotators without labels": ({"additional_answers": [[["dog"]], [["cat"]]]}, r"additional_answers needs labels"),
    "an annotator's answers not a list": ({"labels": ["dog", "cat"], "additional_answers": [["dog"], [["cat"]]]},
                                         r"additional_answers\[0\]\[0\] must be a list, got str"),
}



@pytest.fixture
def fresh_metric():
    return evaluate.load(str(METRIC_PATH), keep_in_memory=True)


@pytest.mark.parametrize("case", sorted(DEFAULT_CASES))
def test_compute_names_the_bad_index_and_stores_nothing(fresh_metric, case):
    changes, message = DEFAULT_CASES[case]
    with pytest.raises(ValueError, match=message):
        fresh_metric.compute(**{**GOOD, **changes})
    assert len(fresh_metric) == 0
    assert fresh_metric.compute(**GOOD) == GOOD_SCORES  # still usable


def test_a_bad_later_batch_names_its_index_and_keeps_the_earlier_ones(fresh_metric):
    fresh_metric.add_batch(predictions=["a", "b"], references=[["a"], ["b"]])
    with pytest.raises(ValueError, match=r"references\[0\]\[0\] must be a string.*after the first 2 examples"):
        fresh_metric.add_batch(predictions=["c"], references=[[None]])
    with pytest.raises(ValueError, match=r"predictions\[0\] must be a string"):
        fresh_metric.add(prediction=5, reference=["c"])
    assert len(fresh_metric) == 2 and fresh_metric.compute() == {"exact_match": 100.0, "f1": 100.0, "f1_release": 100.0}
    with pytest.raises(ValueError, match=r"Bad inputs for evaluation module: \['labels'\]"):
        fresh_metric.add_batch(**GOOD, labels=["x", "y"])


def test_empty_compute_gives_zeros(fiber_metric):
    assert fiber_metric.compute(predictions=[], references=[]) == {"exact_match": 0.0, "f1": 0.0, "f1_release": 0.0}


def test_unknown_config_is_refused():
    with pytest.raises(ValueError, match=r"Unknown config 'table_2'.*human_agreement"):
        evaluate.load(str(METRIC_PATH), "table_2")


@pytest.mark.parametrize("module", [metric_module, scores, statistics, agreement, report],
                         ids=lambda module: module.__name__)
def test_docstring_examples_run(module, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the examples load "metric/fiber_metric"
    results = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert results.failed == 0 and results.attempted >= 2
    assert ">>> fiber_metric.compute(" in metric_module.FiberMetric.__doc__  # _KWARGS_DESCRIPTION is tested


def test_card_examples_run_and_card_states_the_definitions(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    card = (METRIC_PATH / "README.md").read_text()
    test = doctest.DocTestParser().get_doctest(card, {}, "README.md", str(METRIC_PATH / "README.md"), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
    assert len(test.examples) >= 8
    assert card.startswith("---\n") and "app_file: app.py" in card
    prose = " ".join(card.split())
    statements = ("`string.punctuation`", "token-*set* F1", "0-100", "normalize to nothing", "EM 100 and F1 100", "NFKC")
    for statement in statements:
        assert statement in prose
