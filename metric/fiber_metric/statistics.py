"""Statistics over per-blank scores (percent), (blanks,) or (blanks, columns): mean and deviation, bootstrap intervals,
paired comparisons (paired bootstrap, approximate randomization, McNemar's exact test).

Each column's numbers depend only on its own scores, the settings and the seed. A column with at most one distinct
value per 16 blanks (exact matches, Correct@K) is drawn through its value counts, the same distribution at a cost
that does not grow with the blanks: a resample's mean depends only on how many draws land on each value,
Multinomial(blanks, frequencies), a randomization trial's sum only on how many blanks of each difference are swapped,
Binomial(count, 1/2). Other columns are drawn blank by blank, alike.
"""

import math
from typing import NamedTuple

import numpy as np

# Draws are made in chunks of about this many blanks (or values) in all: small arrays, and, as the generator is
# called once per chunk, the chunks fix which numbers are drawn.
_CHUNK_SIZE = 2**16
_BLANKS_PER_VALUE = 16


class MeanStd(NamedTuple):
    mean: float
    std: float


def _mean(values):
    """An exactly rounded sum over the count (0.0 for none): the mean every score is reported with."""
    return math.fsum(values) / len(values) if len(values) else 0.0


def mean_std(values):
    """Mean and population standard deviation of `values`, (0.0, 0.0) when there are none.

    >>> mean_std([50.0, 100.0, 100.0, 50.0])
    MeanStd(mean=75.0, std=25.0)
    """
    if not len(values):
        return MeanStd(0.0, 0.0)
    values = np.asarray(values, dtype=float)
    mean = _mean(values.tolist())
    return MeanStd(mean, math.sqrt(math.fsum(((values - mean) ** 2).tolist()) / len(values)))


def _check_settings(**settings):
    for name, value in settings.items():
        if name != "confidence_level" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if name == "confidence_level" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"confidence_level must be a number between 0 and 1, got {value!r}")
        if name == "confidence_level" and not 0 < value < 1:
            raise ValueError(f"confidence_level must be between 0 and 1 (e.g. 0.95), got {value!r}")


def _chunks(total, width):
    rows = max(1, _CHUNK_SIZE // max(width, 1))
    return [min(rows, total - start) for start in range(0, total, rows)]


def _product(weights, scores):
    # numpy's einsum runs in one thread: a BLAS product was 10 to 25 times slower on a busy 2-CPU machine.
    return np.einsum("rb,b...->r...", weights.astype(float), scores)


def _distinct(column):
    """The column's distinct values and their counts, when there are at most one per 16 blanks (else None)."""
    values, counts = np.unique(column, return_counts=True)
    return (values, counts) if len(values) * _BLANKS_PER_VALUE <= len(column) else None


def _resample_means(columns, num_bootstrap, seed):
    """Means of resamples of the rows of `columns` (blanks, columns), drawn blank by blank, every column alike."""
    num_blanks, rng, means = len(columns), np.random.default_rng(seed), []
    for size in _chunks(num_bootstrap, num_blanks):
        # How often each resample draws each blank: one bincount of all draws, offset by resample (uint32 draws are
        # the numbers int64 ones are, from the same 32-bit stream, made faster).
        draws = rng.integers(0, num_blanks, (size, num_blanks), dtype=np.uint32).astype(np.intp)
        draws += num_blanks * np.arange(size)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * num_blanks).reshape(size, num_blanks)
        means.append(_product(counts, columns) / num_blanks)
    return np.concatenate(means)


def bootstrap_means(scores, num_bootstrap=10_000, seed=0):
    """Means of `num_bootstrap` resamples of the blanks (the rows of `scores`, drawn with replacement), of shape
    (num_bootstrap,) or (num_bootstrap, columns); each column is resampled alone (see the module's description).
    The difference of two systems' columns, resampled as one column, is a paired bootstrap."""
    _check_settings(num_bootstrap=num_bootstrap)
    scores = np.asarray(scores, dtype=float)
    if not len(scores):
        return np.zeros((num_bootstrap, *scores.shape[1:]))
    columns = scores.reshape(len(scores), -1)
    means, by_blank = np.empty((num_bootstrap, columns.shape[1])), []
    for index, column in enumerate(columns.T):
        if (distinct := _distinct(column)) is None:
            by_blank.append(index)
            continue
        values, counts = distinct
        rng = np.random.default_rng(seed)
        chunks = _chunks(num_bootstrap, len(values))
        draws = [rng.multinomial(len(column), counts / len(column), size=size) for size in chunks]
        means[:, index] = np.concatenate([_product(drawn, values) for drawn in draws]) / len(column)
    if by_blank:
        means[:, by_blank] = _resample_means(columns[:, by_blank], num_bootstrap, seed)
    return means.reshape(num_bootstrap, *scores.shape[1:])


def paired_bootstrap_means(scores, num_bootstrap=10_000, seed=0):
    """As `bootstrap_means`, but every column resampled with the same draws of blanks: a resample holds the same
    blanks for every system, what ranking the systems within each resample needs (the leaderboard's rank intervals)."""
    _check_settings(num_bootstrap=num_bootstrap)
    scores = np.asarray(scores, dtype=float)
    if not len(scores):
        return np.zeros((num_bootstrap, *scores.shape[1:]))
    means = _resample_means(scores.reshape(len(scores), -1), num_bootstrap, seed)
    return means.reshape(num_bootstrap, *scores.shape[1:])


def confidence_interval(scores, confidence_level=0.95, num_bootstrap=10_000, seed=0):
    """Percentile bootstrap confidence interval of the mean of per-blank `scores`: the (1 - level) / 2 and
    (1 + level) / 2 quantiles of `bootstrap_means`, shape (2,) for (blanks,), (columns, 2) for (blanks, columns).

    >>> confidence_interval([0.0, 100.0] * 200, confidence_level=0.95, num_bootstrap=2000).round()
    array([45., 55.])
    """
    _check_settings(confidence_level=confidence_level, num_bootstrap=num_bootstrap)
    tail = (1 - confidence_level) / 2
    return np.moveaxis(np.quantile(bootstrap_means(scores, num_bootstrap, seed), [tail, 1 - tail], axis=0), 0, -1)


def randomization_p_value(scores_a, scores_b, num_permutations=10_000, seed=0):
    """Two-sided p-value of the difference of two systems' mean scores, by approximate randomization.

    Each trial swaps the two systems' scores of each blank with probability 1/2; p = (trials whose |difference| >=
    the observed |difference|, + 1) / (trials + 1), never below 1 / (trials + 1). Shapes (blanks,) or (blanks, pairs).

    >>> randomization_p_value([100.0] * 30, [0.0] * 30, num_permutations=999)
    0.001
    """
    _check_settings(num_permutations=num_permutations)
    differences = np.asarray(scores_a, dtype=float) - np.asarray(scores_b, dtype=float)
    columns = differences.reshape(len(differences), -1)
    totals = columns.sum(axis=0)
    # Up to rounding: sums of the same numbers in another order may differ in their last digits.
    observed = np.abs(totals) - 1e-9 * (1 + np.abs(columns).sum(axis=0))
    at_least, by_blank = np.zeros(len(totals), dtype=int), []
    for index, column in enumerate(columns.T):
        values, counts = np.unique(column[column != 0], return_counts=True)  # ties never change the sum
        if len(values) * _BLANKS_PER_VALUE > len(column):
            by_blank.append(index)
            continue
        rng = np.random.default_rng([seed, 1])  # another stream than the bootstrap's for the same seed
        for size in _chunks(num_permutations, len(values)):
            swapped = rng.binomial(counts, 0.5, size=(size, len(values)))
            at_least[index] += int((np.abs(totals[index] - 2 * _product(swapped, values)) >= observed[index]).sum())
    if by_blank:
        rng, num_blanks = np.random.default_rng([seed, 1]), len(columns)
        for size in _chunks(num_permutations, num_blanks):
            swaps = np.unpackbits(np.frombuffer(rng.bytes(-(-size * num_blanks // 8)), dtype=np.uint8))
            swaps = swaps[: size * num_blanks].reshape(size, num_blanks)
            # A swap flips the sign of a blank's difference: the sum loses twice the swapped differences.
            swapped = _product(swaps, columns[:, by_blank])
            at_least[by_blank] += (np.abs(totals[by_blank] - 2 * swapped) >= observed[by_blank]).sum(axis=0)
    p_values = (at_least + 1) / (num_permutations + 1)
    return float(p_values[0]) if differences.ndim == 1 else p_values


def mcnemar_p_value(exact_matches_a, exact_matches_b):
    """McNemar's exact two-sided test of two systems' per-blank exact matches (0 or 100) on the same blanks: over the
    discordant blanks (b: only A matches, c: only B), p = min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2).

    >>> round(mcnemar_p_value([100.0] * 9 + [0.0], [0.0] * 9 + [100.0]), 6)  # b = 9, c = 1: 2 * 11 / 1024
    0.021484
    """
    matches_a, matches_b = np.asarray(exact_matches_a) > 0, np.asarray(exact_matches_b) > 0
    only_a, only_b = int(np.sum(matches_a & ~matches_b)), int(np.sum(matches_b & ~matches_a))
    discordant = only_a + only_b
    if not discordant:
        return 1.0
    k = np.arange(1, min(only_a, only_b) + 1)
    # log P(X = k) for k = 0 .. min(b, c), from log C(n, k) = sum over j <= k of log((n - j + 1) / j)
    log_pmf = np.concatenate([[0.0], np.cumsum(np.log((discordant - k + 1) / k))]) - discordant * math.log(2)
    largest = log_pmf.max()
    return min(1.0, float(2 * math.exp(largest) * np.exp(log_pmf - largest).sum()))


def compare_systems(scores_a, scores_b, confidence_level=0.95, num_bootstrap=10_000, num_permutations=10_000, seed=0):
    """A paired comparison of two systems' per-blank scores on the same blanks: the difference of their means (A - B),
    its paired bootstrap interval and the randomization `p_value`; a list of them for (blanks, pairs).

    >>> compare_systems([100.0, 100.0, 0.0, 100.0], [100.0, 100.0, 0.0, 100.0])
    {'difference': 0.0, 'difference_ci': [0.0, 0.0], 'p_value': 1.0}
    """
    _check_settings(confidence_level=confidence_level, num_bootstrap=num_bootstrap, num_permutations=num_permutations)
    scores_a, scores_b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if scores_a.shape != scores_b.shape:
        raise ValueError(f"scores_a and scores_b differ in shape ({scores_a.shape} != {scores_b.shape})")
    means = [[mean_std(column).mean for column in scores.reshape(len(scores), -1).T] for scores in (scores_a, scores_b)]
    intervals = confidence_interval(scores_a - scores_b, confidence_level, num_bootstrap, seed).reshape(-1, 2)
    p_values = np.reshape(randomization_p_value(scores_a, scores_b, num_permutations, seed), -1)
    comparisons = [
        {"difference": a - b, "difference_ci": [float(low), float(high)], "p_value": float(p_value)}
        for a, b, (low, high), p_value in zip(*means, intervals, p_values)
    ]
    return comparisons[0] if scores_a.ndim == 1 else comparisons
