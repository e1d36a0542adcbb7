"""Statistics over per-blank scores (percent), (blanks,) or (blanks, columns): mean and deviation, bootstrap intervals,
paired comparisons (paired bootstrap, the sign-flip test, McNemar's exact test), Holm's correction, rank intervals
coherent with it, and the minimum detectable difference. Each column's numbers depend only on its own scores, the
settings and the seed. A column of at most one distinct value per 16 blanks (exact matches) is resampled through its
value counts, Multinomial(blanks, frequencies), at a cost that does not grow with the blanks; others blank by blank.
"""

import math
from typing import NamedTuple

import numpy as np

# Draws are made in chunks of about this many blanks (or values) in all: the chunks fix which numbers are drawn.
_CHUNK_SIZE, _BLANKS_PER_VALUE = 2**16, 16


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


def _check_settings(confidence_level=0.5, **counts):
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, (int, float)):
        raise ValueError(f"confidence_level must be a number between 0 and 1, got {confidence_level!r}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be between 0 and 1 (e.g. 0.95), got {confidence_level!r}")
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")


def _chunks(total, width):
    rows = max(1, _CHUNK_SIZE // max(width, 1))
    return [min(rows, total - start) for start in range(0, total, rows)]


def _product(weights, scores):
    # numpy's einsum runs in one thread: a BLAS product was 10 to 25 times slower on a busy 2-CPU machine.
    return np.einsum("rb,b...->r...", weights.astype(float), scores)


def _resample_means(columns, num_bootstrap, seed):
    """Means of resamples of the rows of `columns` (blanks, columns), drawn blank by blank, every column alike."""
    num_blanks, rng, means = len(columns), np.random.default_rng(seed), []
    for size in _chunks(num_bootstrap, num_blanks):
        # How often each resample draws each blank, in one bincount (uint32 draws: int64's numbers, made faster).
        draws = rng.integers(0, num_blanks, (size, num_blanks), dtype=np.uint32).astype(np.intp)
        draws += num_blanks * np.arange(size)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * num_blanks).reshape(size, num_blanks)
        means.append(_product(counts, columns) / num_blanks)
    return np.concatenate(means)


def bootstrap_means(scores, num_bootstrap=10_000, seed=0, paired=False):
    """Means of `num_bootstrap` resamples of the blanks (the rows of `scores`, drawn with replacement), of shape
    (num_bootstrap,) or (num_bootstrap, columns); each column resampled alone, or, `paired`, every column with the
    same draws. The difference of two systems' columns, resampled as one column, is a paired bootstrap."""
    _check_settings(num_bootstrap=num_bootstrap)
    scores = np.asarray(scores, dtype=float)
    if not len(scores):
        return np.zeros((num_bootstrap, *scores.shape[1:]))
    columns = scores.reshape(len(scores), -1)
    means, by_blank = np.empty((num_bootstrap, columns.shape[1])), []
    for index, column in enumerate(columns.T):
        values, counts = np.unique(column, return_counts=True)
        if paired or len(values) * _BLANKS_PER_VALUE > len(column):
            by_blank.append(index)
            continue
        rng = np.random.default_rng(seed)
        chunks = _chunks(num_bootstrap, len(values))
        draws = [rng.multinomial(len(column), counts / len(column), size=size) for size in chunks]
        means[:, index] = np.concatenate([_product(drawn, values) for drawn in draws]) / len(column)
    if by_blank:
        means[:, by_blank] = _resample_means(columns[:, by_blank], num_bootstrap, seed)
    return means.reshape(num_bootstrap, *scores.shape[1:])


def paired_bootstrap_means(scores, num_bootstrap=10_000, seed=0):
    """`bootstrap_means` with every column resampled on the same draws of blanks, as ranking within resamples needs."""
    return bootstrap_means(scores, num_bootstrap, seed, paired=True)


def confidence_interval(scores, confidence_level=0.95, num_bootstrap=10_000, seed=0):
    """Percentile bootstrap confidence interval of the mean of per-blank `scores`: the (1 - level) / 2 and
    (1 + level) / 2 quantiles of `bootstrap_means`, shape (2,) for (blanks,), (columns, 2) for (blanks, columns).

    >>> confidence_interval([0.0, 100.0] * 200, confidence_level=0.95, num_bootstrap=2000).round()
    array([45., 55.])
    """
    _check_settings(confidence_level=confidence_level, num_bootstrap=num_bootstrap)
    tail = (1 - confidence_level) / 2
    return np.moveaxis(np.quantile(bootstrap_means(scores, num_bootstrap, seed), [tail, 1 - tail], axis=0), 0, -1)


def sign_flip_p_value(scores_a, scores_b):
    """Two-sided p-value of the paired sign-flip (randomization) test of two systems' per-blank scores, in its normal
    approximation: were the systems equally good, each blank's difference d would be as likely to have either sign,
    so z = sum(d) / sqrt(sum(d^2)) and p = P(|Z| >= |z|). No floor: Holm's correction over many pairs can still pass
    it (randomization trials cannot go below 1 / (trials + 1)). Shapes (blanks,) or (blanks, pairs).

    >>> sign_flip_p_value([100.0] * 30, [0.0] * 30) < 1e-7, sign_flip_p_value([100.0, 0.0], [0.0, 100.0])
    (True, 1.0)
    """
    differences = np.asarray(scores_a, dtype=float) - np.asarray(scores_b, dtype=float)
    columns = differences.reshape(len(differences), -1)
    # Exactly rounded sums: a column's p-value is the same alone or beside others, and 0 for a system against itself.
    sums = [(math.fsum(column), math.fsum(column**2)) for column in columns.T]
    p_values = np.array([math.erfc(abs(total) / math.sqrt(2 * squares)) if squares else 1.0 for total, squares in sums])
    return float(p_values[0]) if differences.ndim == 1 else p_values


def mcnemar_p_value(exact_matches_a, exact_matches_b):
    """McNemar's exact two-sided test of two systems' per-blank exact matches (0 or 100) on the same blanks: over the
    discordant blanks (b: only A matches, c: only B), p = min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2).

    >>> round(mcnemar_p_value([100.0] * 9 + [0.0], [0.0] * 9 + [100.0]), 6)  # b = 9, c = 1: 2 * 11 / 1024
    0.021484
    """
    matches_a, matches_b = np.asarray(exact_matches_a) > 0, np.asarray(exact_matches_b) > 0
    only_a, only_b = int(np.sum(matches_a & ~matches_b)), int(np.sum(matches_b & ~matches_a))
    term = tail = 1  # C(n, k) for k = 0 .. min(b, c), in whole numbers: exact, and as small as the data make it
    for k in range(1, min(only_a, only_b) + 1):
        term = term * (only_a + only_b - k + 1) // k
        tail += term
    return min(1.0, 2 * tail / 2 ** (only_a + only_b))


def compare_systems(scores_a, scores_b, confidence_level=0.95, num_bootstrap=10_000, seed=0, exact_matches=False):
    """A paired comparison of two systems' per-blank scores on the same blanks: the difference of their means (A - B),
    its paired bootstrap interval and its two-sided `p_value`: McNemar's exact test for `exact_matches` (0/100 scores),
    else `sign_flip_p_value`; a list of them for (blanks, pairs).

    >>> compare_systems([100.0, 100.0, 0.0, 100.0], [100.0, 100.0, 0.0, 100.0])
    {'difference': 0.0, 'difference_ci': [0.0, 0.0], 'p_value': 1.0}
    """
    _check_settings(confidence_level=confidence_level, num_bootstrap=num_bootstrap)
    scores_a, scores_b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    if scores_a.shape != scores_b.shape:
        raise ValueError(f"scores_a and scores_b differ in shape ({scores_a.shape} != {scores_b.shape})")
    columns_a, columns_b = (scores.reshape(len(scores), -1).T for scores in (scores_a, scores_b))
    means = [[mean_std(column).mean for column in columns] for columns in (columns_a, columns_b)]
    intervals = confidence_interval(scores_a - scores_b, confidence_level, num_bootstrap, seed).reshape(-1, 2)
    p_values = ([mcnemar_p_value(a, b) for a, b in zip(columns_a, columns_b)] if exact_matches
                else np.reshape(sign_flip_p_value(scores_a, scores_b), -1))
    comparisons = [
        {"difference": a - b, "difference_ci": [float(low), float(high)], "p_value": float(p_value)}
        for a, b, (low, high), p_value in zip(*means, intervals, p_values)
    ]
    return comparisons[0] if scores_a.ndim == 1 else comparisons


def holm(p_values):
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m becomes the max over j <= i of
    min(1, (m - j + 1) p_(j)), which keeps the chance of any false difference among the m tests at most the level.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p_values = np.asarray(p_values, dtype=float)
    order, adjusted = np.argsort(p_values, kind="stable"), np.empty(len(p_values))
    multipliers = len(p_values) - np.arange(len(p_values))
    adjusted[order] = np.maximum.accumulate(np.minimum(1.0, multipliers * p_values[order]))
    return adjusted.tolist()


def rank_intervals(means, adjusted_p_values, alpha=0.05):
    """Each system's rank interval (best rank 1), drawn from the corrected pairwise tests so that two systems whose
    intervals do not overlap always differ significantly: from 1 + the systems significantly better to n - the systems
    significantly worse, the upper end then raised, where needed, to meet the interval of every system the tests do
    not tell it from. `means`: name -> mean score; `adjusted_p_values`: (name, name) -> the pair's p-value corrected
    for the comparisons made (`holm`), in either order; a pair not given is not told apart.

    >>> means = {"Delta": 70.4, "Tied A": 62.1, "Tied B": 61.9}
    >>> rank_intervals(means, {("Delta", "Tied A"): 0.091, ("Delta", "Tied B"): 0.091, ("Tied A", "Tied B"): 0.9})
    {'Delta': (1, 3), 'Tied A': (1, 3), 'Tied B': (1, 3)}
    >>> rank_intervals(means, {("Delta", "Tied A"): 0.001, ("Delta", "Tied B"): 0.001, ("Tied A", "Tied B"): 0.9})
    {'Delta': (1, 1), 'Tied A': (2, 3), 'Tied B': (2, 3)}
    """
    better = {name: set() for name in means}  # the systems significantly better than each
    for (a, b), p_value in adjusted_p_values.items():
        if p_value < alpha and means[a] != means[b]:
            better[min(a, b, key=means.get)].add(max(a, b, key=means.get))
    low = {name: 1 + len(above) for name, above in better.items()}
    high = {name: len(means) - sum(name in above for above in better.values()) for name in means}
    for name in means:
        untold = [other for other in means if other != name and other not in better[name] and name not in better[other]]
        high[name] = max([high[name], *(low[other] for other in untold)])
    return {name: (low[name], high[name]) for name in means}


# z of 0.975 (a two-sided test at 5%) plus z of 0.8 (80% power)
_Z_TEST_AND_POWER = 1.959963984540054 + 0.8416212335729143


def minimum_detectable_difference(scores):
    """The smallest difference between two systems' mean scores that a paired two-sided test at 5% finds with 80%
    power on these blanks: 2.80 sd(d) / sqrt(blanks), where sd(d)^2 = var(A) + var(B) - 2 cov(A, B) is the per-blank
    variance of the differences, from the observed spread and correlation of the systems' scores (blanks, systems),
    averaged over every pair (as lmms-eval's `power` command, after Miller 2024). None for fewer than 2 systems.

    >>> round(minimum_detectable_difference([[100.0, 0.0], [0.0, 100.0]] * 500), 1)  # 2.80 * 100 / 1000 ** 0.5
    8.9
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.shape[1] < 2 or not len(scores):
        return None
    covariance = np.atleast_2d(np.cov(scores, rowvar=False, bias=True))
    variances = np.diag(covariance)
    pairs = np.triu_indices(len(variances), 1)
    spread = (variances[:, None] + variances[None, :] - 2 * covariance)[pairs].mean()
    return _Z_TEST_AND_POWER * math.sqrt(max(spread, 0.0) / len(scores))
