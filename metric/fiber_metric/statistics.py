"""The statistics of the FIBER metric over per-blank scores: mean and deviation, bootstrap confidence intervals, and
paired comparisons of two systems (paired bootstrap, approximate randomization, McNemar's exact test).

Each function takes per-blank scores (percent) of shape (blanks,) or (blanks, columns) and depends
only on them, the settings and the seed: a column's interval is the same alone or beside others.
"""

import math
from typing import NamedTuple

import numpy as np


class MeanStd(NamedTuple):
    mean: float
    std: float


def _mean(values):
    """`mean_std(values).mean` (an exactly rounded sum over the count; 0.0 for none), without the deviation."""
    return math.fsum(values) / len(values) if len(values) else 0.0


def _segment_means(values, lengths):
    """`_mean` of each segment of `values` (an array; segments of `lengths` laid end to end), 0.0 for an empty one.

    In numpy where a plain sum is already exact: a segment of one value, or of whole numbers (such as exact
    matches) whose sum stays below 2**53; through `math.fsum` for the others.
    """
    segments = np.repeat(np.arange(len(lengths)), lengths)
    means = np.bincount(segments, weights=values, minlength=len(lengths)) / np.maximum(lengths, 1)
    fractional = np.bincount(segments, weights=values != np.floor(values), minlength=len(lengths)) > 0
    if np.abs(values).sum() >= 2**53:
        fractional[:] = True
    ends = np.cumsum(lengths)
    inexact = np.flatnonzero(fractional & (lengths > 1))
    if len(inexact):
        listed = values.tolist()
        means[inexact] = [_mean(listed[start:end]) for start, end in zip((ends - lengths)[inexact].tolist(), ends[inexact].tolist())]
    return means


def column_means(scores):
    """`mean_std(column).mean` of each column of `scores` (blanks, columns), to the last bit, as an array.

    At numpy's speed where a column holds whole numbers (exact matches, Correct@K), whose plain sum
    is exact; through `math.fsum` for the others.

    >>> column_means([[100.0, 50.0], [0.0, 100.0], [100.0, 200 / 3]]).tolist()
    [66.66666666666667, 72.22222222222223]
    """
    columns = np.asarray(scores, dtype=float).T
    # Column by column: `_segment_means` lists the floats of a segment it sums exactly, and the columns of 100,000
    # blanks' scores would be hundreds of MB as Python floats at once.
    return np.array([_segment_means(column, np.array([len(column)]))[0] for column in columns], dtype=float)


def mean_std(values):
    """Mean and population standard deviation of `values`, (0.0, 0.0) when there are none.

    >>> mean_std([50.0, 100.0, 100.0, 50.0])
    MeanStd(mean=75.0, std=25.0)
    """
    if not len(values):
        return MeanStd(0.0, 0.0)
    values = np.asarray(values, dtype=float)
    mean = _mean(values.tolist())  # math.fsum reads a list of floats several times faster than numpy's scalars
    deviations = values - mean
    return MeanStd(mean, math.sqrt(math.fsum((deviations * deviations).tolist()) / len(values)))



# Resamples (and randomization trials) are drawn in chunks of about this many blanks (or distinct values)
# in all: arrays that stay in the CPU cache (on 2 CPUs, 2**16 ran about 1.4 times as fast as 2**20 for
# 1,000 blanks), and bounded memory.
_CHUNK_SIZE = 2**16
# A column with at most one distinct value per this many blanks (exact matches, Correct@K, most F1 and
# differences of them) is resampled through its value counts: a binomial draw costs about as much as
# 16 drawn blanks.
_BLANKS_PER_VALUE = 16


def _check_settings(**settings):
    """Refuse a confidence level outside (0, 1) and a number of resamples or trials below 1."""
    for name, value in settings.items():
        if name == "confidence_level":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"confidence_level must be a number between 0 and 1, got {value!r}")
            if not 0 < value < 1:
                raise ValueError(f"confidence_level must be between 0 and 1 (e.g. 0.95), got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")


def _chunk_sizes(total, width):
    """How many of `total` resamples to draw at a time, each `width` wide: about `_CHUNK_SIZE` in all."""
    rows = max(1, _CHUNK_SIZE // max(width, 1))
    return [min(rows, total - start) for start in range(0, total, rows)]


def _product(weights, scores):
    """`weights` (resamples, blanks) times `scores` (blanks,) or (blanks, columns), without BLAS.

    numpy's einsum runs in one thread. A multithreaded BLAS matrix product was as fast on idle
    CPUs but 10 to 25 times slower on a busy 2-CPU machine, its threads waiting for each other.
    """
    return np.einsum("rb,b...->r...", weights.astype(float), scores)


def _few_values(column):
    """The column's distinct values and how many blanks hold each, when they are few (else None)."""
    values, counts = np.unique(column, return_counts=True)
    return (values, counts) if len(values) * _BLANKS_PER_VALUE <= len(column) else None


def _index_resample_means(columns, num_bootstrap, seed):
    """Means of resamples of the blanks (the rows of `columns`, (blanks, columns)), drawn index by index."""
    num_blanks = len(columns)
    rng = np.random.default_rng(seed)
    means = []
    for size in _chunk_sizes(num_bootstrap, num_blanks):
        # How often each resample draws each blank: one bincount of all draws, offset by resample.
        # (uint32 draws are the same numbers as int64 ones, from the same 32-bit stream, made faster.)
        draws = rng.integers(0, num_blanks, (size, num_blanks), dtype=np.uint32).astype(np.intp)
        draws += num_blanks * np.arange(size)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * num_blanks).reshape(size, num_blanks)
        means.append(_product(counts, columns) / num_blanks)
    return np.concatenate(means)


def _count_resample_means(values, counts, num_bootstrap, seed):
    """Means of resamples of blanks holding `values` (`counts` blanks each), drawn as value counts.

    How many of a resample's draws land on each value is Multinomial(blanks, counts / blanks): the
    same resampled means as drawing the blanks, at a cost that does not grow with the blanks.
    """
    num_blanks = counts.sum()
    rng = np.random.default_rng(seed)
    means = []
    for size in _chunk_sizes(num_bootstrap, len(values)):
        means.append(_product(rng.multinomial(num_blanks, counts / num_blanks, size=size), values) / num_blanks)
    return np.concatenate(means)


def bootstrap_means(scores, num_bootstrap=10_000, seed=0):
    """Means of `num_bootstrap` resamples of the blanks (the rows of `scores`, drawn with replacement).

    `scores` holds per-blank scores, of shape (blanks,) or (blanks, columns); the result has shape
    (num_bootstrap,) or (num_bootstrap, columns). Each column's resampled means depend only on
    the column, `num_bootstrap` and `seed`, not on its neighbours: a column is resampled alone with
    the generator seeded by `seed`, through its value counts when it has at most one distinct value
    per 16 blanks (a resample's mean depends only on how many draws land on each value), else index
    by index (such columns are resampled alike). The difference of two systems' columns, resampled
    as one column, is a paired bootstrap.
    """
    _check_settings(num_bootstrap=num_bootstrap)
    scores = np.asarray(scores, dtype=float)
    num_blanks = len(scores)
    if not num_blanks:
        return np.zeros((num_bootstrap, *scores.shape[1:]))
    columns = scores.reshape(num_blanks, -1)
    means = np.empty((num_bootstrap, columns.shape[1]))
    by_index = []
    for index, column in enumerate(columns.T):
        few = _few_values(column)
        if few is None:
            by_index.append(index)
        else:
            means[:, index] = _count_resample_means(*few, num_bootstrap, seed)
    if by_index:
        means[:, by_index] = _index_resample_means(columns[:, by_index], num_bootstrap, seed)
    return means.reshape(num_bootstrap, *scores.shape[1:])


def paired_bootstrap_means(scores, num_bootstrap=10_000, seed=0):
    """Means of `num_bootstrap` resamples of the blanks, every column resampled with the same draws of blanks.

    Shapes as in `bootstrap_means`; there each column is resampled alone (the same numbers for a
    system alone or beside others), here all columns are resampled together (always blank by
    blank), so a resample holds the same blanks for every system: what ranking the systems within
    each resample needs (the leaderboard's rank intervals).
    """
    _check_settings(num_bootstrap=num_bootstrap)
    scores = np.asarray(scores, dtype=float)
    if not len(scores):
        return np.zeros((num_bootstrap, *scores.shape[1:]))
    columns = scores.reshape(len(scores), -1)
    return _index_resample_means(columns, num_bootstrap, seed).reshape(num_bootstrap, *scores.shape[1:])


def confidence_interval(scores, confidence_level=0.95, num_bootstrap=10_000, seed=0):
    """Percentile bootstrap confidence interval of the mean of per-blank `scores`: [low, high].

    The (1 - level) / 2 and (1 + level) / 2 quantiles of `bootstrap_means`. Shape (2,) for scores
    of shape (blanks,); (columns, 2) for (blanks, columns).

    >>> confidence_interval([0.0, 100.0] * 200, confidence_level=0.95, num_bootstrap=2000).round()
    array([45., 55.])
    """
    _check_settings(confidence_level=confidence_level, num_bootstrap=num_bootstrap)
    means = bootstrap_means(scores, num_bootstrap, seed)
    tail = (1 - confidence_level) / 2
    return np.moveaxis(np.quantile(means, [tail, 1 - tail], axis=0), 0, -1)



def _index_swaps_at_least(differences, totals, observed, num_permutations, seed):
    """Per column of `differences` (blanks, columns): the trials, swapping blank by blank, whose |sum| >= observed."""
    num_blanks = len(differences)
    rng = np.random.default_rng([seed, 1])  # another stream than the bootstrap's for the same seed
    at_least = np.zeros(len(totals), dtype=int)
    for size in _chunk_sizes(num_permutations, num_blanks):
        swaps = np.unpackbits(np.frombuffer(rng.bytes(-(-size * num_blanks // 8)), dtype=np.uint8))
        swaps = swaps[: size * num_blanks].reshape(size, num_blanks)
        # A swap flips the sign of a blank's difference: the sum loses twice the swapped differences.
        at_least += (np.abs(totals - 2 * _product(swaps, differences)) >= observed).sum(axis=0)
    return at_least


def _count_swaps_at_least(values, counts, total, observed, num_permutations, seed):
    """The trials whose |sum| >= observed, for blanks whose differences are `values` (`counts` blanks each).

    The sum after the swaps depends only on how many blanks of each difference are swapped,
    Binomial(count, 1/2) each: drawn directly, at a cost that does not grow with the blanks.
    """
    rng = np.random.default_rng([seed, 1])
    at_least = 0
    for size in _chunk_sizes(num_permutations, len(values)):
        swapped = rng.binomial(counts, 0.5, size=(size, len(values)))
        at_least += int((np.abs(total - 2 * _product(swapped, values)) >= observed).sum())
    return at_least


def randomization_p_value(scores_a, scores_b, num_permutations=10_000, seed=0):
    """Two-sided p-value of the difference of two systems' mean scores, by approximate randomization.

    Each of `num_permutations` trials swaps the two systems' scores of each blank with probability
    1/2; p = (number of trials whose |difference| >= the observed |difference|, + 1) / (trials + 1),
    so never below 1 / (trials + 1). Shapes (blanks,) or (blanks, pairs); as in `bootstrap_means`,
    each pair's trials depend only on its own scores and `seed`: drawn as the number of swapped
    blanks of each distinct difference when there are at most one per 16 blanks, else blank by blank.

    >>> randomization_p_value([100.0] * 30, [0.0] * 30, num_permutations=999)
    0.001
    """
    _check_settings(num_permutations=num_permutations)
    differences = np.asarray(scores_a, dtype=float) - np.asarray(scores_b, dtype=float)
    columns = differences.reshape(len(differences), -1)
    totals = columns.sum(axis=0)
    # Up to rounding: sums of the same numbers in another order may differ in their last digits.
    observed = np.abs(totals) - 1e-9 * (1 + np.abs(columns).sum(axis=0))
    at_least = np.zeros(len(totals), dtype=int)
    blank_by_blank = []
    for index, column in enumerate(columns.T):
        values, counts = np.unique(column[column != 0], return_counts=True)  # ties never change the sum
        if len(values) * _BLANKS_PER_VALUE <= len(column):
            at_least[index] = _count_swaps_at_least(values, counts, totals[index], observed[index], num_permutations, seed)
        else:
            blank_by_blank.append(index)
    if blank_by_blank:
        at_least[blank_by_blank] = _index_swaps_at_least(
            columns[:, blank_by_blank], totals[blank_by_blank], observed[blank_by_blank], num_permutations, seed
        )
    p_values = (at_least + 1) / (num_permutations + 1)
    return float(p_values[0]) if differences.ndim == 1 else p_values


def mcnemar_p_value(exact_matches_a, exact_matches_b):
    """McNemar's exact two-sided test of two systems' per-blank exact matches (0 or 100) on the same blanks.

    Over the discordant blanks (b: only A matches, c: only B matches), p = min(1, 2 P(X <= min(b, c)))
    with X ~ Binomial(b + c, 1/2); 1 when there is no discordant blank.

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
    """A paired comparison of two systems' per-blank scores on the same blanks.

    Returns the difference of their means (A - B), its paired bootstrap confidence interval (both
    systems resampled alike) and the randomization `p_value`. Scores of shape (blanks,) give one
    such dict; (blanks, pairs) a list of them, computed together from the same resamples.

    >>> compare_systems([100.0, 100.0, 0.0, 100.0], [100.0, 100.0, 0.0, 100.0])
    {'difference': 0.0, 'difference_ci': [0.0, 0.0], 'p_value': 1.0}
    """
    _check_settings(confidence_level=confidence_level, num_bootstrap=num_bootstrap, num_permutations=num_permutations)
    scores_a, scores_b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if scores_a.shape != scores_b.shape:
        raise ValueError(f"scores_a and scores_b differ in shape ({scores_a.shape} != {scores_b.shape})")
    means_a = column_means(scores_a.reshape(len(scores_a), -1)).tolist()
    means_b = column_means(scores_b.reshape(len(scores_b), -1)).tolist()
    intervals = confidence_interval(scores_a - scores_b, confidence_level, num_bootstrap, seed).reshape(-1, 2)
    p_values = np.reshape(randomization_p_value(scores_a, scores_b, num_permutations, seed), -1)
    comparisons = [
        {"difference": mean_a - mean_b, "difference_ci": [float(low), float(high)], "p_value": float(p_value)}
        for mean_a, mean_b, (low, high), p_value in zip(means_a, means_b, intervals, p_values)
    ]
    return comparisons[0] if scores_a.ndim == 1 else comparisons
