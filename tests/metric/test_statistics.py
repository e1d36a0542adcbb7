"""Bootstrap intervals, paired comparisons and McNemar's exact test, against hand-worked and textbook values."""

import math

import numpy as np
import pytest

from fiberbench.metric import bootstrap_means, compare_systems, confidence_interval, mcnemar_p_value, randomization_p_value


def exact_matches(rate: float, num_blanks: int, seed: int = 0) -> np.ndarray:
    """0/100 scores of `num_blanks` blanks, `rate` of them matches, in a shuffled order."""
    scores = np.zeros(num_blanks)
    scores[: round(rate * num_blanks)] = 100.0
    return np.random.default_rng(seed).permutation(scores)


def test_bootstrap_means_are_the_means_of_resamples_drawn_one_by_one():
    scores = np.random.default_rng(3).random((50, 3)) * 100
    rng = np.random.default_rng(7)  # the same stream, drawn one resample at a time
    expected = np.array([scores[rng.integers(0, 50, 50)].mean(axis=0) for _ in range(300)])
    np.testing.assert_allclose(bootstrap_means(scores, num_bootstrap=300, seed=7), expected, rtol=1e-12)


def test_a_column_of_few_values_is_sampled_through_their_counts():
    # 0/100 exact matches of 640 blanks: a resample's mean depends only on how many of its 640 draws
    # land on a match, Multinomial(640, frequencies): drawn directly, whatever the number of blanks.
    scores = exact_matches(0.3, 640)
    rng = np.random.default_rng(7)
    counts = rng.multinomial(640, [0.7, 0.3], size=300)
    expected = counts @ np.array([0.0, 100.0]) / 640
    np.testing.assert_allclose(bootstrap_means(scores, num_bootstrap=300, seed=7), expected, rtol=1e-12)


@pytest.mark.parametrize("values", [[0.0, 100.0], [0.0, 50.0, 200 / 3, 100.0]])
def test_both_ways_of_resampling_give_the_same_distribution(values):
    # The same column, sampled through its value counts (640 blanks) and, 16 times over, through
    # the blanks' indices (40 distinct values in 640 blanks is too many for the counts).
    rng = np.random.default_rng(5)
    scores = rng.choice(values, size=640)
    by_counts = bootstrap_means(scores, num_bootstrap=20_000, seed=1)
    jitter = rng.random(640) * 1e-6  # 640 distinct values: the indices are drawn
    by_indices = bootstrap_means(scores + jitter, num_bootstrap=20_000, seed=2)
    quantiles = [0.025, 0.25, 0.5, 0.75, 0.975]
    spread = np.std(by_indices)
    # Monte Carlo error, and the means of 640 0/100 scores lie on steps of 100 / 640 (0.08 spreads).
    np.testing.assert_allclose(np.quantile(by_counts, quantiles), np.quantile(by_indices, quantiles), atol=0.1 * spread)
    assert np.std(by_counts) == pytest.approx(spread, rel=0.03)
    assert np.mean(by_counts) == pytest.approx(np.mean(by_indices), abs=0.03 * spread)


def test_columns_are_resampled_alike_whatever_their_neighbours():
    scores = np.random.default_rng(4).random((80, 4)) * 100
    together = bootstrap_means(scores, num_bootstrap=500, seed=1)
    alone = bootstrap_means(scores[:, 2], num_bootstrap=500, seed=1)
    np.testing.assert_allclose(together[:, 2], alone, rtol=1e-12)


@pytest.mark.parametrize(("rate", "num_blanks"), [(0.5, 200), (0.3, 500), (0.6, 1000), (0.15, 400)])
def test_exact_match_intervals_contain_the_estimate_and_match_the_normal_width(rate, num_blanks):
    scores = exact_matches(rate, num_blanks)
    low, high = confidence_interval(scores, confidence_level=0.95)
    assert low <= scores.mean() <= high
    normal_width = 100 * 2 * 1.96 * math.sqrt(rate * (1 - rate) / num_blanks)
    assert high - low == pytest.approx(normal_width, rel=0.2)


def test_compute_adds_intervals_only_when_asked(fiber_metric):
    predictions, references = ["a dog", "cat", "a bird", "fish"], [["dog"], ["cat", "kitten"], ["hawk"], ["fish"]]
    plain = fiber_metric.compute(predictions=predictions, references=references)
    assert plain == {"exact_match": 75.0, "f1": 75.0}
    results = fiber_metric.compute(predictions=predictions, references=references, confidence_level=0.9, seed=3,
                                   categories=["animal", "animal", "bird", "animal"], num_bootstrap=2000,
                                   candidates=[["dog"], ["x", "cat"], ["bird"], ["fish"]])
    columns = np.array([[100.0, 100.0, 0.0, 100.0], [100.0, 100.0, 0.0, 100.0]]).T
    expected = confidence_interval(columns, 0.9, num_bootstrap=2000, seed=3)[0].tolist()
    assert results["exact_match_ci"] == results["f1_ci"] == pytest.approx(expected)
    assert set(results["correct_at_k_ci"]) == {"1", "2"} and len(results["map_ci"]) == 2
    assert results["f1_ci_by_category"]["bird"] == [0.0, 0.0]
    animals = confidence_interval([100.0, 100.0, 100.0], 0.9, num_bootstrap=2000, seed=3).tolist()
    assert results["exact_match_ci_by_category"]["animal"] == animals == [100.0, 100.0]


def test_a_system_compared_with_itself_differs_by_nothing():
    scores = exact_matches(0.55, 300)
    comparison = compare_systems(scores, scores)
    assert comparison == {"difference": 0.0, "difference_ci": [0.0, 0.0], "p_value": 1.0}
    assert mcnemar_p_value(scores, scores) == 1.0


def test_systems_that_differ_on_most_blanks_are_told_apart():
    better, worse = exact_matches(0.7, 300, seed=1), exact_matches(0.3, 300, seed=2)
    comparison = compare_systems(better, worse)
    low, high = comparison["difference_ci"]
    assert comparison["difference"] == pytest.approx(40.0) and 0 < low < 40 < high
    assert comparison["p_value"] < 0.01 and mcnemar_p_value(better, worse) < 0.01


def test_randomization_of_few_distinct_differences_matches_the_exact_test():
    # 160 blanks: 96 ties, 40 differences of +100, 24 of -50 (observed sum 2,800). Swapping a blank
    # flips its sign: the sum is 100 (2 X - 40) - 50 (2 Y - 24) with X ~ B(40, 1/2), Y ~ B(24, 1/2).
    differences = [0.0] * 96 + [100.0] * 40 + [-50.0] * 24
    exact = sum(math.comb(40, x) * math.comb(24, y) / 2**64 for x in range(41) for y in range(25)
                if abs(100 * (2 * x - 40) - 50 * (2 * y - 24)) >= 2800)
    p_value = randomization_p_value(differences, [0.0] * 160, num_permutations=200_000)
    assert p_value == pytest.approx(exact, abs=0.003)


def test_randomization_matches_the_exact_permutation_test_of_three_blanks():
    # Differences +100, +100, +100: of the 8 equally likely swap patterns, 2 give |sum| >= 300.
    p_value = randomization_p_value([100.0] * 3, [0.0] * 3, num_permutations=40_000)
    assert p_value == pytest.approx(2 / 8, abs=0.01)


def test_pairs_compared_together_equal_pairs_compared_one_by_one():
    rng = np.random.default_rng(9)
    scores_a, scores_b = rng.random((120, 3)) * 100, rng.random((120, 3)) * 100
    settings = {"num_bootstrap": 800, "num_permutations": 800, "seed": 2}
    together = compare_systems(scores_a, scores_b, **settings)
    for column, comparison in enumerate(together):
        alone = compare_systems(scores_a[:, column], scores_b[:, column], **settings)
        assert comparison["difference"] == alone["difference"] and comparison["p_value"] == alone["p_value"]
        assert comparison["difference_ci"] == pytest.approx(alone["difference_ci"], rel=1e-12)


@pytest.mark.parametrize(("only_a", "only_b"), [(9, 1), (1, 9), (3, 3), (0, 5), (12, 4), (40, 25)])
def test_mcnemar_is_the_exact_binomial_test_on_discordant_blanks(only_a, only_b):
    both, neither = 7, 5
    scores_a = [100.0] * only_a + [0.0] * only_b + [100.0] * both + [0.0] * neither
    scores_b = [0.0] * only_a + [100.0] * only_b + [100.0] * both + [0.0] * neither
    discordant = only_a + only_b
    tail = sum(math.comb(discordant, k) for k in range(min(only_a, only_b) + 1)) / 2**discordant
    assert mcnemar_p_value(scores_a, scores_b) == pytest.approx(min(1.0, 2 * tail), rel=1e-12)


@pytest.mark.parametrize(("settings", "message"), [
    ({"confidence_level": 1.0}, "confidence_level must be between 0 and 1"),
    ({"confidence_level": "0.95"}, "confidence_level must be a number"),
    ({"num_bootstrap": 0}, "num_bootstrap must be a positive whole number"),
    ({"num_bootstrap": 2.5}, "num_bootstrap must be a positive whole number"),
])
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        confidence_interval([1.0, 2.0], **settings)
