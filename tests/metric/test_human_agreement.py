"""Human agreement (the paper's Table 2) on a hand-worked example, as a plain function and an evaluate config."""

import pytest

from fiberbench.metric import human_agreement

# Two blanks. Normalized, the first has label "dog" and annotators ["dog", "puppy"], ["small dog"],
# ["cat", "dog"]; the second has label "man" and ["man"], ["", ""] (left out), ["person", "man"].
LABELS = ["a dog", "A man"]
ADDITIONAL_ANSWERS = [
    [["dog", "puppy"], ["a small dog"], ["cat", "The dog."]],
    [["man"], ["The!", "..."], ["a person", "man"]],
]
# Each scored answer's (EM, best F1) against the other annotators' answers and the label:
#   blank 1: "dog" (1, 1), "puppy" (0, 0) | "small dog" vs "dog" (0, 2/3) | "cat" (0, 0), "dog" (1, 1)
#   blank 2: "man" (1, 1) | "person" (0, 0), "man" (1, 1)
FIRST_EM, FIRST_F1 = [[100, 0, 0], [100, 0]], [[100, 200 / 3, 0], [100, 0]]
ALL_EM, ALL_F1 = [[100, 0, 0, 0, 100], [100, 0, 100]], [[100, 0, 200 / 3, 0, 100], [100, 0, 100]]


def mean(values):
    return sum(values) / len(values)


def std(values):
    return (sum((value - mean(values)) ** 2 for value in values) / len(values)) ** 0.5


def expected_table() -> dict[str, float]:
    table = {}
    for which, em, f1 in (("first_answers", FIRST_EM, FIRST_F1), ("all_answers", ALL_EM, ALL_F1)):
        for metric, scores in (("exact_match", em), ("f1", f1)):
            per_caption = [mean(caption) for caption in scores]
            per_answer = [score for caption in scores for score in caption]
            for level, values in (("per_caption", per_caption), ("per_answer", per_answer)):
                table[f"{which}_{level}_{metric}"] = mean(values)
                table[f"{which}_{level}_{metric}_std"] = std(values)
    return table


def test_three_annotators_by_hand():
    results = human_agreement(LABELS, ADDITIONAL_ANSWERS)
    assert results == pytest.approx(
        {**expected_table(), "num_captions": 2, "num_first_answers": 5, "num_all_answers": 8,
         "num_annotators_left_out": 1}
    )
    assert results["first_answers_per_caption_exact_match"] == pytest.approx(100 * 5 / 12)
    assert results["first_answers_per_answer_f1"] == pytest.approx(100 * 8 / 15)


def test_the_evaluate_config_gives_the_same_table(agreement_metric):
    results = agreement_metric.compute(labels=LABELS, additional_answers=ADDITIONAL_ANSWERS)
    assert results == human_agreement(LABELS, ADDITIONAL_ANSWERS)


def test_an_annotator_with_no_one_to_compare_with_is_not_scored():
    results = human_agreement(["The"], [[["dog"], ["!"]]])
    assert results["num_captions"] == results["num_first_answers"] == 0
    assert results["num_annotators_left_out"] == 2  # the empty label and the annotator who wrote "!"
    assert results["first_answers_per_caption_f1"] == results["first_answers_per_caption_f1_std"] == 0.0


def test_empty_input_gives_zeros():
    results = human_agreement([], [])
    assert set(results.values()) == {0}


@pytest.mark.parametrize(
    ("labels", "additional_answers", "message"),
    [
        (["a", "b"], [[["a"]]], r"additional_answers\[1\] is missing"),
        (["a", None], [[["a"]], [["b"]]], r"labels\[1\] must be a string"),
        (["a"], [[["a"], ["b", 2]]], r"additional_answers\[0\]\[1\]\[1\] must be a string, got int"),
        (["a"], [["a"]], r"additional_answers\[0\]\[0\] must be a list, got str"),
    ],
)
def test_bad_input_names_the_index(labels, additional_answers, message):
    with pytest.raises(ValueError, match=message):
        human_agreement(labels, additional_answers)
