"""Human agreement (the paper's Table 2) as the FIBER release computed it, worked by hand."""

import pytest

from fiberbench.metric import human_agreement

# Two blanks. Normalized, the first has label "dog" and annotators ["dog", "puppy"], ["small dog"],
# ["cat", "dog"]; the second has label "man" and ["man"], [] (both answers empty: left out),
# ["person", "man"].
LABELS = ["a dog", "A man"]
ADDITIONAL_ANSWERS = [
    [["dog", "puppy"], ["a small dog"], ["cat", "The dog."]],
    [["man"], ["The!", "..."], ["a person", "man"]],
]
# Each scored answer's EM and best F1 against the other annotators' answers and the label, by annotator:
#   blank 1: "dog" (100, 100), "puppy" (0, 0) | "small dog" vs "dog" (0, 2/3) | "cat" (0, 0), "dog" (100, 100)
#            | the label "dog" (100, 100)
#   blank 2: "man" (100, 100) | "person" (0, 0), "man" (100, 100) | the label "man" (100, 100)
FIRST_EM, FIRST_F1 = [[100, 0, 0], [100, 0]], [[100, 200 / 3, 0], [100, 0]]
ALL_EM = [100, 0, 0, 0, 100, 100, 100, 0, 100, 100]
ALL_F1 = [100, 0, 200 / 3, 0, 100, 100, 100, 0, 100, 100]


def mean(values):
    return sum(values) / len(values)


def std(values):
    return (sum((value - mean(values)) ** 2 for value in values) / len(values)) ** 0.5


def test_two_blanks_by_hand():
    results = human_agreement(LABELS, ADDITIONAL_ANSWERS)
    expected = {"num_captions": 2, "num_first_answers": 5, "num_answers": 10, "num_annotators_left_out": 1,
                "num_empty_answers_dropped": 2, "num_repeated_answers_dropped": 0}
    for metric, first, every in (("exact_match", FIRST_EM, ALL_EM), ("f1", FIRST_F1, ALL_F1)):
        captions = [mean(caption) for caption in first]
        expected[f"first_answers_per_caption_{metric}"] = mean(captions)
        expected[f"first_answers_per_caption_{metric}_std"] = std(captions)
        expected[f"all_answers_per_answer_{metric}"] = mean(every)
        expected[f"all_answers_per_answer_{metric}_std_across_answers"] = std(every)
    assert results == pytest.approx(expected)


def test_an_empty_answer_is_dropped_so_the_first_answer_is_the_first_that_keeps_a_token():
    # Normalized: label "cat"; A ["", "dog"]; B ["", "kitten"]; C ["dog", "dog", "puppy"]: C's "DOG" repeats
    # "dog" (the same text up to case, as in the release) and is dropped; "Dog!" is another text and stays.
    results = human_agreement(["a cat"], [[["The!", "dog"], ["an", "kitten"], ["dog", "Dog!", "DOG", "puppy"]]])
    # First answers: A "dog" vs {cat, kitten, dog, puppy} 100; B "kitten" vs {cat, dog, dog, puppy} 0;
    # C "dog" vs {cat, dog, kitten} 100. Were the empty answers kept, A's and B's "" would match each other.
    assert results["first_answers_per_caption_exact_match"] == pytest.approx(200 / 3)
    assert results["num_first_answers"] == 3 and results["num_annotators_left_out"] == 0
    assert results["num_empty_answers_dropped"] == 2 and results["num_repeated_answers_dropped"] == 1
    # All answers: A [100], B [0], C "dog" 100, "Dog!" 100 and "puppy" 0, the label "cat" 0.
    assert results["all_answers_per_answer_exact_match"] == pytest.approx(100 * 3 / 6)
    assert results["num_answers"] == 6


def test_the_label_counts_at_the_answer_level_only():
    results = human_agreement(["a cat"], [[["cat"], ["dog"]]])
    # Per caption, annotators only: "cat" vs {cat, dog} 100, "dog" vs {cat, cat} 0.
    assert results["first_answers_per_caption_exact_match"] == 50.0
    # Per answer, the label "cat" too, scored against both annotators: 100.
    assert results["all_answers_per_answer_exact_match"] == pytest.approx(200 / 3)
    assert results["num_first_answers"] == 2 and results["num_answers"] == 3


def test_the_per_answer_deviation_is_across_annotators_given_their_ids():
    labels = ["a cat", "a man"]
    additional_answers = [[["cat", "kitten"], ["dog"]], [["man"], ["woman", "man"]]]
    annotator_ids = [["w1", "w2"], ["w1", "w3"]]
    # EM of each answer: blank 1: w1 "cat" 100, "kitten" 0; w2 "dog" 0; label "cat" 100.
    #                    blank 2: w1 "man" 100; w3 "woman" 0, "man" 100; label "man" 100.
    by_annotator = {"w1": [100, 0, 100], "w2": [0], "w3": [0, 100], "labels": [100, 100]}
    results = human_agreement(labels, additional_answers, annotator_ids)
    pooled = [score for scores in by_annotator.values() for score in scores]
    assert results["all_answers_per_answer_exact_match"] == pytest.approx(mean(pooled))  # 62.5
    assert results["all_answers_per_answer_exact_match_std_across_answers"] == pytest.approx(std(pooled))  # 48.4
    across_annotators = std([mean(scores) for scores in by_annotator.values()])  # 36.1
    assert results["all_answers_per_answer_exact_match_std_across_annotators"] == pytest.approx(across_annotators)
    assert results["num_annotators"] == 4
    assert "all_answers_per_answer_exact_match_std_across_annotators" not in human_agreement(labels, additional_answers)


def test_per_caption_scores():
    results = human_agreement(["a cat", "the"], [[["cat"], ["dog"]], [["dog"], ["!"]]], per_example=True)
    assert results["first_answers_exact_match_per_caption"] == [50.0, None]  # no one to compare "dog" with
    assert results["first_answers_f1_per_caption"] == [50.0, None]


def test_the_evaluate_config_gives_the_same_table(agreement_metric):
    ids = [["w1", "w2", "w3"], ["w1", "w4", "w2"]]
    results = agreement_metric.compute(labels=LABELS, additional_answers=ADDITIONAL_ANSWERS, annotator_ids=ids)
    assert results == human_agreement(LABELS, ADDITIONAL_ANSWERS, ids)


def test_an_annotator_with_no_one_to_compare_with_is_not_scored():
    results = human_agreement(["The"], [[["dog"], ["!"]]])
    assert results["num_captions"] == results["num_first_answers"] == results["num_answers"] == 0
    assert results["num_annotators_left_out"] == 2  # the empty label and the annotator who wrote "!"
    assert results["first_answers_per_caption_f1"] == results["first_answers_per_caption_f1_std"] == 0.0


def test_empty_input_gives_zeros():
    results = human_agreement([], [])
    assert set(results.values()) == {0}


@pytest.mark.parametrize(("labels", "additional_answers", "annotator_ids", "message"), [
    (["a", "b"], [[["a"]]], None, r"additional_answers\[1\] is missing"),
    (["a", None], [[["a"]], [["b"]]], None, r"labels\[1\] must be a string"),
    (["a"], [[["a"], ["b", 2]]], None, r"additional_answers\[0\]\[1\]\[1\] must be a string, got int"),
    (["a"], [["a"]], None, r"additional_answers\[0\]\[0\] must be a list, got str"),
    (["a"], [[["a"], ["b"]]], [["w1"]], r"annotator_ids\[0\]\[1\] is missing"),
    (["a"], [[["a"], ["b"]]], [["w1", "w1"]], r"annotator_ids\[0\] names an annotator twice"),
    (["a"], [[["a"]]], [[1]], r"annotator_ids\[0\]\[0\] must be a string, got int"),
    ("a dog", [], None, r"labels must be a list, got str"),
])
def test_bad_input_names_the_index(labels, additional_answers, annotator_ids, message):
    with pytest.raises(ValueError, match=message):
        human_agreement(labels, additional_answers, annotator_ids)


def test_first_answers_only_gives_the_same_first_answer_results():
    full = human_agreement(LABELS, ADDITIONAL_ANSWERS, per_example=True)
    first = human_agreement(LABELS, ADDITIONAL_ANSWERS, per_example=True, first_answers_only=True)
    assert first == {key: value for key, value in full.items() if not key.startswith(("all_answers", "num_answers"))}
