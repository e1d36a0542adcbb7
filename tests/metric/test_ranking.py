"""Correct@K and MAP of ranked candidate answers (FIRE, §2.1), worked by hand, duplicates included."""

import pytest

from fiberbench.metric import average_precision, correct_at_k, distinct_candidates, score_predictions

REFERENCES = ["cliff", "hill", "mountain"]


@pytest.mark.parametrize(
    ("candidates", "first_correct_rank", "expected_average_precision"),
    [
        (["a cliff", "tree", "hill"], 1, 100 * (1 / 1 + 2 / 3) / 2),
        (["tree", "a cliff", "Cliff", "hill"], 2, 100 * (1 / 2 + 2 / 3) / 2),  # "Cliff" is "a cliff" again
        (["mountain", "The Mountain!", "tree", "hill"], 1, 100 * (1 / 1 + 2 / 3) / 2),  # one hit, not two
        (["tree", "Tree.", "the tree", "hill"], 2, 100 / 2),  # "hill" is the second distinct candidate
        (["tree", "rock", "sky"], None, 0.0),
        ([], None, 0.0),
    ],
)
def test_hand_worked_rankings(candidates, first_correct_rank, expected_average_precision):
    for k in (1, 2, 3, 4, 8):
        found = first_correct_rank is not None and first_correct_rank <= k
        assert correct_at_k(candidates, REFERENCES, k) == 100 * found
    assert average_precision(candidates, REFERENCES) == pytest.approx(expected_average_precision)


def test_correct_at_k_and_map_over_blanks():
    results = score_predictions(
        predictions=["tree", "a room", "x"],
        references=[REFERENCES, ["room", "house"], ["y"]],
        candidates=[
            ["tree", "rock", "sky", "hill", "cliff"],  # hits at distinct ranks 4 and 5
            ["a gym", "house", "the House", "room"],  # hits at distinct ranks 2 and 3
            ["x"],
        ],
    )
    assert results["correct_at_k"] == pytest.approx({"1": 0.0, "2": 100 / 3, "4": 200 / 3})
    blank_ap = [(1 / 4 + 2 / 5) / 2, (1 / 2 + 2 / 3) / 2, 0.0]
    assert results["map"] == pytest.approx(100 * sum(blank_ap) / 3)


def test_k_goes_up_to_the_longest_list():
    def ks(lengths):
        candidates = [["x"] * length for length in lengths]
        results = score_predictions(["x"] * len(lengths), [["x"]] * len(lengths), candidates=candidates)
        return list(results["correct_at_k"])

    assert ks([1]) == ["1"]
    assert ks([3, 2]) == ["1", "2"]
    assert ks([8, 1]) == ["1", "2", "4", "8"]
    assert ks([0]) == ["1"]


def test_empty_candidates_count_as_wrong():
    results = score_predictions(["a", "b"], [["a"], ["b"]], candidates=[[], ["b"]])
    assert results["correct_at_k"] == {"1": 50.0}
    assert results["map"] == 50.0


@pytest.mark.parametrize(
    ("beams", "distinct"),
    [
        (["a police officer", "A police officer", "the officer"], ["a police officer", "the officer"]),
        (["a", "a man", "The!", "A man."], ["a man"]),
        (["a", "the"], []),
        ([], []),
    ],
)
def test_distinct_candidates_keep_the_first_spelling_and_drop_what_names_nothing(beams, distinct):
    assert distinct_candidates(beams) == distinct
