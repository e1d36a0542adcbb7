"""Ranks that say when a lead is real: rank intervals over paired bootstrap resamples, and Holm's correction.

The leaderboard ranks systems by a mean over the same blanks; with about 1,000 blanks a split, a
lead of a point or two may be luck of the blanks. A system's rank interval is the range of ranks it
takes across resamples of the blanks (each resample the same blanks for every system, so the
systems' scores stay paired), and the pairwise p-values of `fiberbench evaluate`'s comparisons
are corrected for their number with Holm's step-down procedure.
"""

# Two means closer than this are a tie in a resample: sums of the same scores in another order may
# differ in their last digits, and a tie must not become a rank.
TIE_TOLERANCE = 1e-9


def rank_intervals(
    columns: dict, confidence_level: float = 0.95, num_bootstrap: int = 10_000, seed: int = 0
) -> dict[str, tuple[int, int]]:
    """Each system's rank interval (best rank 1) from its per-blank scores (`columns`: name -> scores, same blanks).

    In each of `num_bootstrap` paired resamples of the blanks (`paired_bootstrap_means`), a
    system's rank is 1 + the number of systems with a higher mean in it (tied systems share the
    better rank); its interval runs from the (1 - level) / 2 to the (1 + level) / 2 quantile of those
    ranks, taken at ranks that occur (the lower one below, the higher one above).

    >>> rank_intervals({"a": [100.0] * 40, "b": [0.0, 100.0] * 20, "c": [0.0] * 40})
    {'a': (1, 1), 'b': (2, 2), 'c': (3, 3)}
    """
    import numpy as np

    from fiberbench.metric import paired_bootstrap_means

    names = list(columns)
    if not names:
        return {}
    means = paired_bootstrap_means(np.stack([columns[name] for name in names], axis=1), num_bootstrap, seed)
    # ranks[r, i] = 1 + #{j : mean_j > mean_i in resample r}
    ranks = 1 + (means[:, None, :] > means[:, :, None] + TIE_TOLERANCE).sum(axis=2)
    tail = (1 - confidence_level) / 2
    low = np.quantile(ranks, tail, axis=0, method="lower")
    high = np.quantile(ranks, 1 - tail, axis=0, method="higher")
    return {name: (int(lowest), int(highest)) for name, lowest, highest in zip(names, low, high)}


def holm(p_values) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: reject a hypothesis at level a when its adjusted p <= a.

    The i-th smallest of m p-values becomes max over j <= i of min(1, (m - j + 1) p_(j)), which keeps
    the chance of any false rejection among the m tests at most a (family-wise error rate).

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    import numpy as np

    p_values = np.asarray(p_values, dtype=float)
    order = np.argsort(p_values, kind="stable")
    count = len(p_values)
    stepped = np.maximum.accumulate(np.minimum(1.0, (count - np.arange(count)) * p_values[order]))
    adjusted = np.empty(count)
    adjusted[order] = stepped
    return [float(value) for value in adjusted]


def rank_text(interval: tuple[int, int]) -> str:
    """A rank interval as the board shows it: "1" or "1-3"."""
    low, high = interval
    return str(low) if low == high else f"{low}-{high}"
