"""Bootstrap intervals, paired comparisons (the sign-flip test, McNemar's exact test), Holm's correction, rank intervals
and the minimum detectable difference, against hand-worked and textbook values."""

import math

import numpy as np
import pytest

from itertools import combinations

from fiberbench.metric import (bootstrap_means, compare_systems, confidence_interval, holm, mcnemar_p_value,
                               minimum_detectable_difference, rank_intervals, sign_flip_p_value)


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
    assert plain == {"exact_match": 75.0, "f1": 75.0, "f1_release": 200 / 3}
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


@pytest.mark.parametrize(("differences", "observed"), [
    ([0.0] * 96 + [100.0] * 40 + [-50.0] * 24, 2800),  # exact p 3.2e-05
    ([0.0] * 100 + [100.0] * 34 + [-50.0] * 40, 1400),  # exact p about 0.05
])
def test_the_sign_flip_test_is_close_to_the_exact_permutation_test(differences, observed):
    # Flipping the sign of each blank's difference at random: the sum is 100 (2 X - n) - 50 (2 Y - m), with
    # X ~ B(n, 1/2) and Y ~ B(m, 1/2) for the n differences of +100 and the m of -50.
    n, m = differences.count(100.0), differences.count(-50.0)
    exact = sum(math.comb(n, x) * math.comb(m, y) / 2 ** (n + m) for x in range(n + 1) for y in range(m + 1)
                if abs(100 * (2 * x - n) - 50 * (2 * y - m)) >= observed)
    assert sign_flip_p_value(differences, [0.0] * len(differences)) == pytest.approx(exact, rel=0.2)


def test_p_values_have_no_floor():
    # 10,000 randomization trials could not go below 1/10,001; with Holm over 40 systems' 780 pairs nothing would pass.
    better, worse = exact_matches(0.8, 1000, seed=1), exact_matches(0.5, 1000, seed=2)
    assert sign_flip_p_value(better, worse) < 1e-12 and mcnemar_p_value(better, worse) < 1e-12
    assert compare_systems(better, worse, num_bootstrap=100, exact_matches=True)["p_value"] == mcnemar_p_value(better,
                                                                                                             worse)


def test_holm_against_its_definition():
    p_values = [0.01, 0.04, 0.03, 0.005, 0.5]
    # Sorted 0.005, 0.01, 0.03, 0.04, 0.5: times 5, 4, 3, 2, 1, each at least the one before.
    assert holm(p_values) == pytest.approx([0.04, 0.09, 0.09, 0.025, 0.5])


def board(skills: dict[str, float], num_blanks: int, seed: int = 0):
    """Per-blank F1-like scores (0, 50 or 100) of systems of the given mean skills, sharing the blanks' difficulty,
    their Holm-corrected comparisons and rank intervals."""
    rng = np.random.default_rng(seed)
    difficulty = rng.random(num_blanks)
    columns = {name: np.where(rng.random(num_blanks) * 0.6 + difficulty * 0.4 < skill / 100, 100.0,
                              np.where(rng.random(num_blanks) < 0.3, 50.0, 0.0)) for name, skill in skills.items()}
    pairs = list(combinations(columns, 2))
    compared = compare_systems(np.stack([columns[a] for a, _ in pairs], 1), np.stack([columns[b] for _, b in pairs], 1),
                               num_bootstrap=20)
    adjusted = dict(zip(pairs, holm([comparison["p_value"] for comparison in compared])))
    means = {name: column.mean() for name, column in columns.items()}
    return means, adjusted, rank_intervals(means, adjusted)


def test_rank_intervals_that_do_not_overlap_differ_significantly_under_holm():
    # The five systems of the leaderboard's report: one clearly best, a near-tie ("Delta" a little ahead of a tied
    # pair, as at 70.4 against 62.1 / 61.9 F1 with Holm p 0.091), one clearly worst.
    skills = {"Best": 90, "Delta": 66, "Tied A": 61, "Tied B": 60.5, "Worst": 20}
    means, adjusted, intervals = board(skills, num_blanks=120, seed=3)
    assert intervals["Best"] == (1, 1) and intervals["Worst"] == (5, 5)
    assert adjusted["Delta", "Tied A"] >= 0.05 and intervals["Delta"][1] >= intervals["Tied A"][0]
    for seed in range(20):  # and on boards of every kind
        skills = dict(zip("ABCDEFG", np.random.default_rng(seed).uniform(30, 80, 7)))
        means, adjusted, intervals = board(skills, num_blanks=80, seed=seed)
        for a, b in combinations(skills, 2):
            (low_a, high_a), (low_b, high_b) = intervals[a], intervals[b]
            if high_a < low_b or high_b < low_a:
                assert adjusted[a, b] < 0.05, (seed, a, b, intervals, adjusted[a, b])
        assert all(1 <= low <= high <= len(skills) for low, high in intervals.values())


def test_a_board_of_40_systems_still_shows_significant_pairs():
    skills = {f"system {index}": 30 + index for index in range(40)}  # 30 to 69: some far apart, some close
    means, adjusted, intervals = board(skills, num_blanks=1000)
    far = [pair for pair in adjusted if abs(skills[pair[0]] - skills[pair[1]]) >= 25]
    assert far and all(adjusted[pair] < 0.05 for pair in far)
    assert intervals["system 39"][0] == 1 and intervals["system 0"][1] == 40


def test_the_minimum_detectable_difference_is_found_80_percent_of_the_time():
    # Two systems' 0/100 scores on 1,000 blanks that differ on 200 of them, 100 each way: the differences' variance is
    # 0.2 * 100^2, so 2.80 * sqrt(2000 / 1000) points. Samples of 1,000 differences of that variance and that mean are
    # found significant at 5% about 80% of the time.
    a = np.repeat([100.0, 0.0], 500)
    b = a.copy()
    b[:100], b[500:600] = 0.0, 100.0
    detectable = minimum_detectable_difference(np.stack([a, b], 1))
    assert detectable == pytest.approx((1.959964 + 0.841621) * math.sqrt(2000 / 1000))
    rng, share = np.random.default_rng(0), (2000 + detectable**2) / 100**2
    up, down = (share + detectable / 100) / 2, (share - detectable / 100) / 2
    samples = rng.choice([100.0, -100.0, 0.0], p=[up, down, 1 - up - down], size=(2000, 1000))
    found = sign_flip_p_value(samples.T, np.zeros((1000, 2000))) < 0.05
    assert found.mean() == pytest.approx(0.8, abs=0.03)
    assert minimum_detectable_difference(np.ones((10, 1))) is None


def test_pairs_compared_together_equal_pairs_compared_one_by_one():
    rng = np.random.default_rng(9)
    scores_a, scores_b = rng.random((120, 3)) * 100, rng.random((120, 3)) * 100
    settings = {"num_bootstrap": 800, "seed": 2}
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
