"""EM, F1, the release's model F1, agreement-weighted accuracy, Correct@K and MAP: properties of normalization and of
the scores, the paper's, the release's, VQA's and FIRE's hand-worked cases, bad input."""

import random
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fiberbench.metric import (annotators_from_example, average_precision, correct_at_k, distinct_candidates, exact_match,
                               f1, f1_release, normalize_answer, references_from_example, score_predictions,
                               vqa_accuracy)

WORD = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=6) | st.sampled_from(
    ["a", "an", "the", "The", "man", "dog", "red", "car", "ice"]
)
SEPARATOR = st.sampled_from([" ", "  ", "\t", "\n", " \xa0 "])
ANSWER = st.builds(lambda words, sep: sep.join(words), st.lists(WORD, max_size=4), SEPARATOR)
ANY_TEXT = st.text(alphabet=string.ascii_letters + string.punctuation + " \t\xa0é", max_size=12) | ANSWER
REFERENCES = st.lists(ANY_TEXT, min_size=1, max_size=5)


def set_f1_as_written(prediction: str, answer: str) -> float:
    """The paper's formula, TP / (TP + (FP + FN) / 2), with both empty defined as 1, in percent."""
    tokens, other = set(normalize_answer(prediction).split()), set(normalize_answer(answer).split())
    if not tokens and not other:
        return 100.0
    true_positives = len(tokens & other)
    return 100 * true_positives / (true_positives + (len(tokens - other) + len(other - tokens)) / 2)


@given(ANY_TEXT, REFERENCES)
def test_exact_match_implies_f1_of_100_and_scores_are_percent(prediction, references):
    score = f1(prediction, references)
    assert 0.0 <= score <= 100.0
    assert exact_match(prediction, references) in (0.0, 100.0)
    if exact_match(prediction, references):
        assert score == 100.0


@given(ANY_TEXT, REFERENCES)
def test_scores_are_the_max_over_answers_and_equal_the_formula(prediction, references):
    assert exact_match(prediction, references) == max(exact_match(prediction, [answer]) for answer in references)
    expected = max(set_f1_as_written(prediction, answer) for answer in references)
    assert f1(prediction, references) == pytest.approx(expected, rel=1e-15)


@given(st.lists(WORD, min_size=1, max_size=5), st.lists(st.sampled_from(["a", "an", "the", "The", "A"]), max_size=3))
def test_normalization_ignores_articles(words, articles):
    rng = random.Random(len(words))
    with_articles = list(words)
    for article in articles:
        with_articles.insert(rng.randrange(len(with_articles) + 1), article)
    assert normalize_answer(" ".join(with_articles)) == normalize_answer(" ".join(words))


def official_normalization(text: str) -> str:
    """The FIBER release's normalization, as the paper defines it: lower-case; delete every ASCII punctuation
    character and every whole word a, an, the, in one pass; collapse white space."""
    import re

    return " ".join(re.sub(r"\b(?:a|an|the)\b|[" + re.escape(string.punctuation) + "]", "", text.lower()).split())


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=30) | ANSWER)
def test_ascii_text_is_normalized_as_the_release_normalized_it(text):
    # The Unicode steps (NFKC, no format characters) change no ASCII text.
    assert normalize_answer(text) == official_normalization(text)


@pytest.mark.parametrize(("text", "plain"), [
    ("cafe\u0301", "caf\u00e9"),  # NFD and NFC
    ("\uff44\uff4f\uff47", "dog"),  # fullwidth
    ("do\u200bg", "dog"),  # a zero-width space
    ("do\u00adg", "dog"),  # a soft hyphen
    ("\ufb01sh", "fish"),  # the ligature fi
    ("\uff34\uff48\uff45 \uff44\uff4f\uff47\uff01", "dog"),  # fullwidth "The dog!"
    ("\ufeffa dog", "dog"),  # a byte order mark
])
def test_unicode_forms_of_an_answer_score_as_its_plain_form(text, plain):
    assert normalize_answer(text) == normalize_answer(plain)
    assert exact_match(text, [plain]) == f1(text, [plain]) == 100.0


@pytest.mark.parametrize(("text", "normalized"), [
    ("Water-filled balloons.", "waterfilled balloons"),  # punctuation is deleted, not replaced by a space
    ("a-team", "team"),  # whole words are found before punctuation goes
    ("The dog's bowl", "dogs bowl"),
    ("the's", "s"),
    ("theater", "theater"),
    ("a_", "a"),  # `\b` counts "_" as part of a word, as the FIBER release's regex does
    ("  A   MAN \t on\nthe  street ", "man on street"),
    ("The!", ""),
])
def test_one_pass_normalization(text, normalized):
    assert normalize_answer(text) == normalized


@pytest.mark.parametrize(("predictions", "exact_matches"), [
    (["a mountain", "a room", "a camera"], [100, 100, 100]), (["a tree", "a gym", "a woman"], [0, 0, 0])
], ids=["T5 + I3D", "T5 fine-tuned"])
def test_table_7_answers_score_as_in_the_paper(predictions, exact_matches, table_7_references):
    results = score_predictions(predictions, table_7_references, per_example=True)
    assert results["exact_match_per_example"] == exact_matches
    assert results["f1_per_example"] == exact_matches


def test_figure_1_answers_give_partial_f1():
    answers = ["balloons", "balloons filled with water", "balloons of water", "pink balloon", "pink water balloon",
               "things", "water", "water balloons", "water-filled balloons"]
    assert exact_match("Water-filled balloons!", answers) == 100
    assert exact_match("a water balloon", answers) == 0
    assert f1("a water balloon", answers) == pytest.approx(80)  # {water, balloon} in "pink water balloon"
    assert f1("red balloons", answers) == pytest.approx(200 / 3)  # "balloons"


def f1_score_many(prediction: str, answers: list[str]) -> float:
    """The release's model F1 (`F1ScoreMany`) from its definition: the raw texts split on white space (no lower-casing,
    articles and punctuation kept), token-set F1, the maximum over the answers; two empty answers match."""
    tokens = set(prediction.split())
    return max(100.0 if not tokens and not set(answer.split()) else
               200 * len(tokens & set(answer.split())) / (len(tokens) + len(set(answer.split()))) for answer in answers)


@pytest.mark.parametrize(("prediction", "answers", "release", "normalized"), [
    ("The Mountain", ["the mountain"], 0.0, 100.0),  # case
    ("a dog", ["dog"], 200 / 3, 100.0),  # articles
    ("dog!", ["dog"], 0.0, 100.0),  # punctuation
    ("the dog's ball", ["dog's ball"], 80.0, 100.0),
    ("dog dog", ["dog"], 100.0, 100.0),  # a repeated token counts once
    ("big dog big", ["dog", "big cat", "Big dog"], 200 / 3, 100.0),
    ("big\tdog ", ["big  dog"], 100.0, 100.0),  # white space of any kind splits
    ("", [""], 100.0, 100.0),  # empty answers
    ("", ["dog"], 0.0, 0.0),
    ("   ", ["the"], 0.0, 100.0),  # "the" is a token to the release; it normalizes to nothing
])
def test_the_release_f1_is_f1_score_many(prediction, answers, release, normalized):
    assert f1_release(prediction, answers) == pytest.approx(f1_score_many(prediction, answers)) == pytest.approx(release)
    assert f1(prediction, answers) == pytest.approx(normalized)


@given(ANY_TEXT, REFERENCES)
def test_the_release_f1_is_f1_score_many_whatever_the_text(prediction, references):
    assert f1_release(prediction, references) == pytest.approx(f1_score_many(prediction, references))


@pytest.mark.parametrize(("gave", "annotators", "accuracy"), [
    (0, 10, 0.0), (1, 10, 30.0), (2, 10, 60.0), (3, 10, 90.0), (4, 10, 100.0), (10, 10, 100.0),
    (1, 1, 0.0),  # the label alone: no one is left when it is left out
    (2, 4, 50.0),  # left out: a giver (2 of 4 subsets: 1/3 each), another (2: 2/3 each)
])
def test_vqa_accuracy_averages_min_1_of_givers_over_3_over_leave_one_out_subsets(gave, annotators, accuracy):
    answers = [["a Dog!"]] * gave + [["cat", "fish"]] * (annotators - gave)
    subsets = [answers[:left] + answers[left + 1:] for left in range(annotators)]
    by_subsets = 100 * sum(min(1, sum(["a Dog!"] == given for given in subset) / 3) for subset in subsets) / annotators
    assert vqa_accuracy("dog", answers) == pytest.approx(by_subsets) == pytest.approx(accuracy)


def test_vqa_accuracy_counts_an_annotator_once_and_the_label_as_one():
    row = {"label": "a dog", "additional_answers": [["dog", "The dog"], ["puppy"], ["Dog."]]}
    annotators = annotators_from_example(row)
    assert annotators == [["a dog"], ["dog", "The dog"], ["puppy"], ["Dog."]]
    assert vqa_accuracy("DOG", annotators) == pytest.approx(100 * (3 * 2 / 3 + 1 * 1) / 4)  # 3 of 4 gave it
    results = score_predictions(["DOG"], [references_from_example(row)], labels=["a dog"],
                                additional_answers=[row["additional_answers"]], per_example=True)
    assert results["vqa_accuracy_per_example"] == [vqa_accuracy("DOG", annotators)]
    with pytest.raises(ValueError, match="annotators is empty"):
        vqa_accuracy("dog", [])


@pytest.mark.parametrize(("prediction", "references", "scores"), [
    ("The!", ["the"], (100, 100)),  # both normalize to nothing
    ("", ["An.", "dog"], (100, 100)),
    ("The!", ["dog"], (0, 0)),
    ("dog", ["", "the"], (0, 0)),
    ("red red car", ["car red"], (0, 100)),  # token SETS: order and repeats do not count
    ("red car", ["red"], (0, 200 / 3)),
])
def test_edge_cases(prediction, references, scores):
    assert (exact_match(prediction, references), f1(prediction, references)) == pytest.approx(scores)


def test_empty_input_gives_zeros():
    results = score_predictions([], [], per_example=True, categories=[], candidates=[])
    assert results == {
        "exact_match": 0.0, "f1": 0.0, "f1_release": 0.0, "exact_match_per_example": [], "f1_per_example": [],
        "f1_release_per_example": [],
        "exact_match_by_category": {}, "f1_by_category": {}, "count_by_category": {},
        "correct_at_k": {"1": 0.0}, "map": 0.0, "correct_at_k_per_example": {"1": []},
        "average_precision_per_example": [],
    }


def test_flat_references_score_against_the_label_alone():
    assert score_predictions(["a dog", "cat"], ["dog", "the dog"]) == {"exact_match": 50.0, "f1": 50.0,
                                                                       "f1_release": 100 / 3}


def test_scores_by_category(table_7_references):
    results = score_predictions(["a mountain", "a gym", "a camera"], table_7_references,
                                categories=["Location", "Location", "Object"])
    assert results["exact_match_by_category"] == results["f1_by_category"] == {"Location": 50.0, "Object": 100.0}
    assert results["count_by_category"] == {"Location": 2, "Object": 1}


def test_single_example_functions_check_their_input():
    with pytest.raises(ValueError, match=r"references is empty"):
        f1("a", [])
    with pytest.raises(ValueError, match=r"prediction must be a string"):
        exact_match(None, ["a"])


def test_references_from_example():
    row = {"label": "A dog", "additional_answers": [["dog", "A dog"], ["puppy", "dog"], []]}
    assert references_from_example(row) == ["A dog", "dog", "puppy"]
    assert references_from_example(row, label_only=True) == ["A dog"]
    assert references_from_example({"label": "a cat", "additional_answers": []}) == ["a cat"]
    with pytest.raises(ValueError, match=r"additional_answers\[1\]\[0\] must be a string"):
        references_from_example({"label": "a", "additional_answers": [["b"], [None]]})
    with pytest.raises(ValueError, match=r"label must be a string"):
        references_from_example({"additional_answers": [["b"]]})


CANDIDATES_REFERENCES = ["cliff", "hill", "mountain"]


@pytest.mark.parametrize(("candidates", "first_correct_rank", "expected_average_precision"), [
    (["a cliff", "tree", "hill"], 1, 100 * (1 / 1 + 2 / 3) / 2),
    (["tree", "a cliff", "Cliff", "hill"], 2, 100 * (1 / 2 + 2 / 3) / 2),  # "Cliff" is "a cliff" again
    (["mountain", "The Mountain!", "tree", "hill"], 1, 100 * (1 / 1 + 2 / 3) / 2),  # one hit, not two
    (["tree", "Tree.", "the tree", "hill"], 2, 100 / 2),  # "hill" is the second distinct candidate
    (["tree", "rock", "sky"], None, 0.0),
    ([], None, 0.0),
])
def test_hand_worked_rankings(candidates, first_correct_rank, expected_average_precision):
    for k in (1, 2, 3, 4, 8):
        found = first_correct_rank is not None and first_correct_rank <= k
        assert correct_at_k(candidates, CANDIDATES_REFERENCES, k) == 100 * found
    assert average_precision(candidates, CANDIDATES_REFERENCES) == pytest.approx(expected_average_precision)


def test_correct_at_k_and_map_over_blanks_with_k_up_to_the_longest_list():
    results = score_predictions(
        predictions=["tree", "a room", "x"],
        references=[CANDIDATES_REFERENCES, ["room", "house"], ["y"]],
        candidates=[["tree", "rock", "sky", "hill", "cliff"], ["a gym", "house", "the House", "room"], ["x"]],
    )
    assert results["correct_at_k"] == pytest.approx({"1": 0.0, "2": 100 / 3, "4": 200 / 3})
    blank_ap = [(1 / 4 + 2 / 5) / 2, (1 / 2 + 2 / 3) / 2, 0.0]
    assert results["map"] == pytest.approx(100 * sum(blank_ap) / 3)
    assert score_predictions(["a", "b"], [["a"], ["b"]], candidates=[[], ["b"]])["correct_at_k"] == {"1": 50.0}
    ks = score_predictions(["x"] * 2, [["x"]] * 2, candidates=[["x"] * 8, ["x"]])["correct_at_k"]
    assert list(ks) == ["1", "2", "4", "8"]


@pytest.mark.parametrize(("beams", "distinct"), [
    (["a police officer", "A police officer", "the officer"], ["a police officer", "the officer"]),
    (["a", "a man", "The!", "A man."], ["a man"]),
    (["a", "the"], []),
])
def test_distinct_candidates_keep_the_first_spelling_and_drop_what_names_nothing(beams, distinct):
    assert distinct_candidates(beams) == distinct
