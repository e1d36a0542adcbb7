"""Bad inputs to the metric through `evaluate.load(...).compute`: a ValueError naming the index, and nothing stored."""

import evaluate
import pytest

from fiberbench.metric import METRIC_PATH

GOOD = {"predictions": ["a dog", "a cat"], "references": [["dog"], ["cat", "kitten"]]}

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
}

AGREEMENT_GOOD = {"labels": ["a dog"], "additional_answers": [[["dog"], ["puppy"]]]}
AGREEMENT_CASES = {
    "labels not a list": ({"labels": "a dog"}, r"labels must be a list, got str"),
    "a number as label": ({"labels": [1]}, r"labels\[0\] must be a string, got int"),
    "an annotator as a string": (
        {"additional_answers": [["dog", ["puppy"]]]},
        r"additional_answers\[0\]\[0\] must be a list, got str",
    ),
    "a number among answers": (
        {"additional_answers": [[["dog", 2]]]},
        r"additional_answers\[0\]\[0\]\[1\] must be a string",
    ),
    "fewer blanks of answers": ({"additional_answers": []}, r"additional_answers\[0\] is missing"),
    "fewer annotator ids": ({"annotator_ids": [["w1"]]}, r"annotator_ids\[0\]\[1\] is missing"),
    "an annotator id twice": ({"annotator_ids": [["w1", "w1"]]}, r"annotator_ids\[0\] names an annotator twice"),
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
    assert fresh_metric.compute(**GOOD) == {"exact_match": 100.0, "f1": 100.0}  # still usable


@pytest.mark.parametrize("case", sorted(AGREEMENT_CASES))
def test_human_agreement_names_the_bad_index(case):
    agreement = evaluate.load(str(METRIC_PATH), "human_agreement", keep_in_memory=True)
    changes, message = AGREEMENT_CASES[case]
    with pytest.raises(ValueError, match=message):
        agreement.compute(**{**AGREEMENT_GOOD, **changes})


def test_a_bad_later_batch_names_its_index_and_keeps_the_earlier_ones(fresh_metric):
    fresh_metric.add_batch(predictions=["a", "b"], references=[["a"], ["b"]])
    with pytest.raises(ValueError, match=r"references\[0\]\[0\] must be a string.*after the first 2 examples"):
        fresh_metric.add_batch(predictions=["c"], references=[[None]])
    with pytest.raises(ValueError, match=r"predictions\[0\] must be a string"):
        fresh_metric.add(prediction=5, reference=["c"])
    assert len(fresh_metric) == 2
    assert fresh_metric.compute() == {"exact_match": 100.0, "f1": 100.0}


def test_an_unknown_config_is_refused():
    with pytest.raises(ValueError, match=r"Unknown config 'table_2'"):
        evaluate.load(str(METRIC_PATH), "table_2")


def test_inputs_of_the_other_config_are_refused(fresh_metric):
    with pytest.raises(ValueError, match=r"Bad inputs for evaluation module: \['labels'\]"):
        fresh_metric.add_batch(**GOOD, labels=["x", "y"])
