"""The FIBER metric's plain functions: answer normalization, exact match and token-set F1, ranked
candidates, human agreement, and the bootstrap and paired tests over per-blank scores.

fiber_metric.py, the `evaluate` module, is a thin class around them. They import neither `evaluate`
nor `datasets` (importing `evaluate` imports transformers' pipelines, hence torch, and takes
seconds), so `fiberbench evaluate` and any script can score with them directly. Like the rest of
this folder, they import nothing from the FIBER package: the folder is pushed to the Hub as it is.

Every score is in percent (0-100), per example as well as averaged: an exact match is 0 or 100.
Answers that normalize to nothing (e.g. "The!" or ""): two such answers match, with EM 100 and
F1 100; against an answer that keeps at least one token, EM and F1 are 0. (The FIBER release
divided by zero in the first case.)
"""

import math
import re
import string
import unicodedata
from collections import Counter
from itertools import chain
from typing import NamedTuple

import numpy as np

_ARTICLE_OR_PUNCTUATION = re.compile(r"\b(?:a|an|the)\b|[" + re.escape(string.punctuation) + "]")


def normalize_answer(text):
    """Lower-cases, deletes ASCII punctuation and the words "a", "an", "the", collapses white space.

    One pass over the lower-cased text, as in the FIBER release: whole words are found before any
    punctuation is deleted, and deleted characters leave no space behind, so "a-team" becomes
    "team" and "water-filled" becomes "waterfilled". Every run of white space, even a lone tab or
    no-break space, becomes one space (the release kept a lone tab, which broke exact matches).

    Text that is not ASCII is first put in Unicode's NFKC form and stripped of its format
    characters (category Cf): "café" typed as "e" + a combining accent, fullwidth "ｄｏｇ", the
    ligature "ﬁ", a zero-width space or a soft hyphen inside a word then read as their plain
    forms, as a reader sees them. ASCII text is left as the release normalized it.

    >>> normalize_answer("  The Water-filled   balloons!")
    'waterfilled balloons'
    >>> normalize_answer("\uff34\uff48\uff45 \ufb01sh\u200b!")  # fullwidth "The", the ligature fi, a zero-width space
    'fish'
    """
    if not text.isascii():
        text = "".join(char for char in unicodedata.normalize("NFKC", text) if unicodedata.category(char) != "Cf")
    return " ".join(_ARTICLE_OR_PUNCTUATION.sub("", text.lower()).split())


def _list(values, name):
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a list, got {type(values).__name__}")
    return list(values)


def _plain_strings(values, depth):
    """Whether `values` is a list of lists ... of `str`, `depth` deep: taken as it is, without a copy or a message.

    Checked level by level with `map(type, ...)`, so no Python code runs per item.
    """
    if type(values) is not list:
        return False
    for _ in range(depth - 1):
        if not set(map(type, values)) <= {list}:
            return False
        values = list(chain.from_iterable(values))
    return set(map(type, values)) <= {str}


def _strings(values, name, depth=1):
    """`values` as a string (depth 0) or as lists nested `depth` deep around strings; errors name the index."""
    if depth == 0:
        if not isinstance(values, str):
            raise ValueError(f"{name} must be a string, got {type(values).__name__}: {values!r}")
        return values
    if _plain_strings(values, depth):
        return values
    values = _list(values, name)
    return [_strings(value, f"{name}[{index}]", depth - 1) for index, value in enumerate(values)]


def _answers(answers, name, index=None):
    """A blank's correct answers (`name`, or `name[index]`) as a non-empty list of strings; one string is a list of one
    answer (a label)."""
    if isinstance(answers, str):
        return [answers]
    if not (answers and _plain_strings(answers, 1)):
        name = name if index is None else f"{name}[{index}]"
        answers = _strings(answers, name)
        if not answers:
            raise ValueError(f"{name} is empty: every prediction needs at least one correct answer")
    return answers


def _check_same_length(name, values, other_name, others):
    if len(values) != len(others):
        missing = f"{other_name}[{len(others)}]" if len(values) > len(others) else f"{name}[{len(values)}]"
        lengths = f"({len(values)} != {len(others)})"
        raise ValueError(f"{name} and {other_name} differ in length {lengths}: {missing} is missing")


def check_predictions(predictions, references, categories=None, candidates=None):
    """The inputs of `score_predictions` as lists, each item checked; an error names the index."""
    predictions = _strings(predictions, "predictions")
    references = [_answers(answers, "references", i) for i, answers in enumerate(_list(references, "references"))]
    _check_same_length("predictions", predictions, "references", references)
    if categories is not None:
        categories = _strings(categories, "categories")
        _check_same_length("predictions", predictions, "categories", categories)
    if candidates is not None:
        candidates = _strings(candidates, "candidates", depth=2)
        _check_same_length("predictions", predictions, "candidates", candidates)
    return predictions, references, categories, candidates


def check_annotations(labels, additional_answers, annotator_ids=None):
    """The inputs of `human_agreement` as lists, each item checked; an error names the index."""
    labels = _strings(labels, "labels")
    additional_answers = _strings(additional_answers, "additional_answers", depth=3)
    _check_same_length("labels", labels, "additional_answers", additional_answers)
    if annotator_ids is not None:
        annotator_ids = _strings(annotator_ids, "annotator_ids", depth=2)
        _check_same_length("additional_answers", additional_answers, "annotator_ids", annotator_ids)
        for index, (annotators, ids) in enumerate(zip(additional_answers, annotator_ids)):
            _check_same_length(f"additional_answers[{index}]", annotators, f"annotator_ids[{index}]", ids)
            if len(set(ids)) != len(ids):
                raise ValueError(f"annotator_ids[{index}] names an annotator twice: {ids}")
    return labels, additional_answers, annotator_ids


class Scores(NamedTuple):
    """Exact match and best token-set F1 of one answer, in percent (0-100)."""

    exact_match: float
    f1: float


class _TokenSets(dict):
    """Normalized answer -> its set of tokens (F1 counts a repeated token once), made on first use."""

    def __missing__(self, normalized):
        tokens = self[normalized] = frozenset(normalized.split())
        return tokens


def _best_match(normalized, correct_normalized, token_sets):
    """The `Scores` of one normalized answer against normalized correct answers.

    Token-set F1 is TP / (TP + (FP + FN) / 2), that is 2 TP / (|answer| + |correct answer|). Its
    denominator is 0 only when both normalize to "", which is an exact match.
    """
    if normalized in correct_normalized:
        return Scores(100.0, 100.0)
    tokens = token_sets[normalized]
    other_token_sets = map(token_sets.__getitem__, correct_normalized)
    return Scores(0.0, max(200 * len(tokens & other) / (len(tokens) + len(other)) for other in other_token_sets))


class _Normalized(dict):
    """Answer -> `normalize_answer(answer)`, made on first use: each distinct text is normalized once."""

    def __missing__(self, text):
        normalized = self[text] = normalize_answer(text)
        return normalized


class CorrectAnswers:
    """The correct answers of a list of blanks, checked and normalized once, to score any number of answer lists.

    `score_predictions` scores through it; so does `fiberbench evaluate`, for several systems on the
    same blanks without normalizing the same correct answers again for each.

    >>> correct = CorrectAnswers([["mountain", "icy cliff"], ["room"]])
    >>> correct.score(["icy mountain", "The room!"])
    {'exact_match': [0.0, 100.0], 'f1': [66.66666666666667, 100.0]}
    >>> correct.score(["a hill", "a gym"], candidates=[["hill", "Icy cliff!"], ["gym"]])["average_precision"]
    [50.0, 0.0]
    """

    def __init__(self, references):
        references = [_answers(answers, "references", i) for i, answers in enumerate(_list(references, "references"))]
        self._normalized = _Normalized()
        self._token_sets = _TokenSets()
        # Per blank: its distinct normalized correct answers and their token sets, as tuples (a frozenset of
        # 20 answers takes ten times the memory: 2 KB, 200 MB for 100,000 blanks).
        self._correct = [tuple(dict.fromkeys(map(self._normalized.__getitem__, answers))) for answers in references]
        self._correct_tokens = [tuple(map(self._token_sets.__getitem__, correct)) for correct in self._correct]

    def __len__(self):
        return len(self._correct)

    def score(self, predictions, candidates=None):
        """Per-blank scores of `predictions` (one answer per blank), in percent, in blank order.

        Returns {"exact_match": [...], "f1": [...]}; with `candidates` (every blank's ranked answers,
        best first) also "correct_at_k" (K = 1, 2, 4, ... up to the longest list, as strings, to
        lists) and "average_precision". Errors name the index, as in `score_predictions`.
        """
        predictions = _strings(predictions, "predictions")
        _check_same_length("predictions", predictions, "references", self._correct)
        exact_matches, f1s = [], []
        normalized_answers, token_sets = self._normalized, self._token_sets
        for text, correct, correct_tokens in zip(predictions, self._correct, self._correct_tokens):
            normalized = normalized_answers[text]
            if normalized in correct:
                exact_matches.append(100.0)
                f1s.append(100.0)
                continue
            exact_matches.append(0.0)
            tokens = token_sets[normalized]
            size = len(tokens)
            f1s.append(max([200 * len(tokens & other) / (size + len(other)) for other in correct_tokens]))
        scores = {"exact_match": exact_matches, "f1": f1s}
        if candidates is not None:
            candidates = _strings(candidates, "candidates", depth=2)
            _check_same_length("predictions", predictions, "candidates", candidates)
            hits = [
                _distinct_hits(map(normalized_answers.__getitem__, ranked), correct)
                for ranked, correct in zip(candidates, self._correct)
            ]
            # The rank of each blank's first correct candidate (None when none is).
            first_hits = [row.index(True) if True in row else None for row in hits]
            longest = max((len(ranked) for ranked in candidates), default=0)
            ks = [2**power for power in range(max(longest, 1).bit_length())]
            scores["correct_at_k"] = {
                str(k): [0.0 if first is None or first >= k else 100.0 for first in first_hits] for k in ks
            }
            scores["average_precision"] = [
                0.0 if first is None else _average_precision(row) for row, first in zip(hits, first_hits)
            ]
        return scores


def _score_example(prediction, references):
    prediction, references = _strings(prediction, "prediction", depth=0), _answers(references, "references")
    return _best_match(normalize_answer(prediction), [normalize_answer(answer) for answer in references], _TokenSets())


def exact_match(prediction, references):
    """100 if the normalized prediction equals any normalized reference, else 0.

    >>> exact_match("The Mountain.", ["cliff", "mountain"])
    100.0
    """
    return _score_example(prediction, references).exact_match


def f1(prediction, references):
    """The best token-set F1 of the prediction against any of the references, in percent (0-100).

    >>> f1("icy mountain", ["mountain", "icy cliff"])
    66.66666666666667
    """
    return _score_example(prediction, references).f1


def _distinct_hits(normalized_candidates, correct_normalized):
    """For each distinct normalized candidate, in rank order: whether it is a correct answer."""
    distinct = dict.fromkeys(normalized_candidates)  # keeps first ranks
    return [normalized in correct_normalized for normalized in distinct]


def _correct_at_k(hits, k):
    return 100.0 if any(hits[:k]) else 0.0


def _average_precision(hits):
    precisions = []  # Precision@rank at each rank that holds a correct candidate
    for rank, hit in enumerate(hits, start=1):
        if hit:
            precisions.append(100 * (len(precisions) + 1) / rank)
    return _mean(precisions)


def _ranking_hits(candidates, references):
    candidates, references = _strings(candidates, "candidates"), _answers(references, "references")
    return _distinct_hits(map(normalize_answer, candidates), {normalize_answer(answer) for answer in references})


def correct_at_k(candidates, references, k):
    """100 if one of the first `k` distinct candidates (after normalization) is a correct answer, else 0.

    >>> correct_at_k(["a tree", "Tree!", "cliff"], ["cliff", "mountain"], k=2)
    100.0
    """
    return _correct_at_k(_ranking_hits(candidates, references), k)


def average_precision(candidates, references):
    """Mean of Precision@k over the ranks k of correct distinct candidates, in percent; 0 when none is correct.

    >>> average_precision(["cliff", "a tree", "hill", "the Cliff"], ["cliff", "hill"])
    83.33333333333334
    """
    return _average_precision(_ranking_hits(candidates, references))


def distinct_candidates(candidates):
    """A model's ranked answers (its beams) as predictions files keep them: the first spelling of each answer after
    normalization, in rank order, and none that normalizes to nothing ("a", "the!"), which names nothing.

    >>> distinct_candidates(["a police officer", "A police officer", "a", "the officer"])
    ['a police officer', 'the officer']
    """
    firsts = {}
    for candidate in _strings(candidates, "candidates"):
        firsts.setdefault(normalize_answer(candidate), candidate)
    firsts.pop("", None)
    return list(firsts.values())


def references_from_example(example, label_only=False):
    """The correct answers of one FIBER row: its label, then every annotator's answers, without repeats.

    >>> references_from_example({"label": "a dog", "additional_answers": [["dog", "a dog"], ["puppy"]]})
    ['a dog', 'dog', 'puppy']
    """
    label = _strings(example.get("label"), "label", depth=0)
    if label_only:
        return [label]
    answers = _strings(example.get("additional_answers") or [], "additional_answers", depth=2)
    return list(dict.fromkeys(chain([label], *answers)))


class MeanStd(NamedTuple):
    mean: float
    std: float


def _mean(values):
    """`mean_std(values).mean` (an exactly rounded sum over the count; 0.0 for none), without the deviation."""
    return math.fsum(values) / len(values) if len(values) else 0.0


def mean_std(values):
    """Mean and population standard deviation of `values`, (0.0, 0.0) when there are none.

    >>> mean_std([50.0, 100.0, 100.0, 50.0])
    MeanStd(mean=75.0, std=25.0)
    """
    if not len(values):
        return MeanStd(0.0, 0.0)
    mean = _mean(values)
    deviations = np.asarray(values, dtype=float) - mean
    return MeanStd(mean, math.sqrt(math.fsum(deviations * deviations) / len(values)))


def score_predictions(
    predictions,
    references,
    per_example=False,
    categories=None,
    candidates=None,
    confidence_level=None,
    num_bootstrap=10_000,
    seed=0,
):
    """What `compute` returns (see its documentation), as a plain function.

    Every distinct string is normalized once (`CorrectAnswers`), so scoring stays fast with many
    answers per blank.

    >>> score_predictions(["a mountain", "gym"], [["mountain", "cliff"], ["room"]])
    {'exact_match': 50.0, 'f1': 50.0}
    """
    predictions, references, categories, candidates = check_predictions(
        predictions, references, categories, candidates
    )
    columns = _score_columns(CorrectAnswers(references).score(predictions, candidates))
    results = _nested({name: mean_std(column).mean for name, column in columns.items()})
    if confidence_level is not None:
        results.update(_nested(_confidence_intervals_by_name(columns, confidence_level, num_bootstrap, seed), "_ci"))
    if per_example:
        results.update(_nested({name: column for name, column in columns.items() if name != "map"}, "_per_example"))
        if candidates is not None:
            results["average_precision_per_example"] = columns["map"]
    if categories is not None:
        results.update(_scores_by_category(categories, columns, confidence_level, num_bootstrap, seed))
    return results


def _score_columns(scores):
    """Every mean `score_predictions` returns, by its key ("correct_at_k" ones by ("correct_at_k", K)), with the
    per-blank scores it averages: `CorrectAnswers.score`'s, average precision under "map"."""
    columns = {"exact_match": scores["exact_match"], "f1": scores["f1"]}
    if "correct_at_k" in scores:
        columns.update({("correct_at_k", k): column for k, column in scores["correct_at_k"].items()})
        columns["map"] = scores["average_precision"]
    return columns


def _scores_by_category(categories, columns, confidence_level, num_bootstrap, seed):
    """Means (and confidence intervals) of EM and F1 within each category (the paper's Table 4), sorted."""
    results = {"exact_match_by_category": {}, "f1_by_category": {}, "count_by_category": {}}
    rows_by_category = {}
    for index, category in enumerate(categories):
        rows_by_category.setdefault(category, []).append(index)
    for name, rows in sorted(rows_by_category.items()):
        in_category = {metric: [columns[metric][row] for row in rows] for metric in Scores._fields}
        for metric, column in in_category.items():
            results[f"{metric}_by_category"][name] = mean_std(column).mean
        results["count_by_category"][name] = len(rows)
        if confidence_level is not None:
            intervals = _confidence_intervals_by_name(in_category, confidence_level, num_bootstrap, seed)
            for metric, interval in intervals.items():
                results.setdefault(f"{metric}_ci_by_category", {})[name] = interval
    return results


def _nested(values, suffix=""):
    """{"f1": x, ("correct_at_k", "1"): y} -> {"f1" + suffix: x, "correct_at_k" + suffix: {"1": y}}."""
    nested = {}
    for name, value in values.items():
        if isinstance(name, tuple):
            nested.setdefault(name[0] + suffix, {})[name[1]] = value
        else:
            nested[name + suffix] = value
    return nested


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


def _confidence_intervals_by_name(columns, confidence_level, num_bootstrap, seed):
    """Name -> [low, high] of named columns of per-blank scores."""
    matrix = np.array(list(columns.values()), dtype=float).reshape(len(columns), -1).T
    intervals = confidence_interval(matrix, confidence_level, num_bootstrap, seed)
    return {name: [float(low), float(high)] for name, (low, high) in zip(columns, intervals)}


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
    columns_a, columns_b = scores_a.reshape(len(scores_a), -1).T, scores_b.reshape(len(scores_b), -1).T
    intervals = confidence_interval(scores_a - scores_b, confidence_level, num_bootstrap, seed).reshape(-1, 2)
    p_values = np.reshape(randomization_p_value(scores_a, scores_b, num_permutations, seed), -1)
    comparisons = [
        {
            "difference": _mean(column_a) - _mean(column_b),
            "difference_ci": [float(low), float(high)],
            "p_value": float(p_value),
        }
        for column_a, column_b, (low, high), p_value in zip(columns_a, columns_b, intervals, p_values)
    ]
    return comparisons[0] if scores_a.ndim == 1 else comparisons


# The label's key among annotator ids: it counts as one annotator across all blanks.
_LABEL = None


def _kept_answers(answers, counts, normalized_answers):
    """An annotator's normalized answers in their order, without empty answers and repeats (counted).

    As in the release, a repeat is the same text up to case and spacing ("DOG" after "dog"); "Dog!"
    after "dog" is another answer, though both are scored as "dog".
    """
    if len(answers) == 1:  # most annotators: nothing to repeat
        normalized = normalized_answers[answers[0]]
        counts["num_empty_answers_dropped"] += not normalized
        return [normalized] if normalized else []
    kept, seen = [], set()
    for answer in answers:
        normalized, text = normalized_answers[answer], " ".join(answer.lower().split())
        if not normalized:
            counts["num_empty_answers_dropped"] += 1
        elif text in seen:
            counts["num_repeated_answers_dropped"] += 1
        else:
            seen.add(text)
            kept.append(normalized)
    return kept


def _best_match_of_others(answer, given, own, holders, token_sets):
    """The `Scores` of an annotator's normalized answer against the other annotators' answers of its caption.

    `given` counts the caption's answers, `own` is the annotator's (a short list); `holders` maps a
    token to the caption's answers holding it. The same as `_best_match` against the others'
    answers, but an answer sharing no token with the answer (F1 0) is never compared with it.
    """
    if given[answer] > own.count(answer):
        return Scores(100.0, 100.0)
    tokens = token_sets[answer]
    size, best = len(tokens), 0.0
    for token in tokens:
        for other in holders[token]:
            if given[other] > own.count(other):
                other_tokens = token_sets[other]
                best = max(best, 200 * len(tokens & other_tokens) / (size + len(other_tokens)))
    return Scores(0.0, best)


def _mean_scores(scores):
    return Scores(*map(_mean, zip(*scores)))


def human_agreement(labels, additional_answers, annotator_ids=None, per_example=False, first_answers_only=False):
    """Human agreement of the paper's Table 2 (leave one annotator out), as the FIBER release computed it.

    Each annotator's answers are normalized; answers that normalize to nothing are dropped one by
    one and an annotator's repeated answer (the same text up to case and spacing) counts once, so an
    annotator's first answer is their
    first answer that keeps a token. An answer is scored by EM and best F1 against the answers of
    every other annotator of the blank, the label counting as one more annotator. An annotator left
    with no answer, or with no one to compare with, is not scored.

    - First answers, per caption: the mean over a caption's annotators of their first answer's
      scores (the label is not scored here), then the mean and population standard deviation over
      the captions with a scored annotator.
    - All answers, per answer: the mean over every scored answer of every annotator and over the
      labels, each scored against all the annotators of its blank. The paper's deviation is across
      annotators: the population standard deviation of each annotator's mean over all their answers
      (all labels counting as one annotator), which needs `annotator_ids`; the deviation across the
      pooled answers is given in any case, under its own name.

    Args:
        labels: the label of every blank.
        additional_answers: for every blank, one list of answers per annotator, in their order.
        annotator_ids: for every blank, the id of each of its annotators (optional).
        per_example: also return the first-answer scores of every caption (None where no one was scored).
        first_answers_only: score only each annotator's first answer (against all the others' answers,
            as above): the first-answer results alone, in about half the time (`fiberbench evaluate`'s
            human row needs no more).

    >>> results = human_agreement(["a dog"], [[["dog", "puppy"], ["The!", "a puppy"], ["cat"]]])
    >>> results["first_answers_per_caption_exact_match"], results["all_answers_per_answer_exact_match"]
    (66.66666666666667, 80.0)
    """
    labels, additional_answers, annotator_ids = check_annotations(labels, additional_answers, annotator_ids)
    counts = dict.fromkeys(("num_annotators_left_out", "num_empty_answers_dropped", "num_repeated_answers_dropped"), 0)
    per_caption = []  # the mean first-answer `Scores` of each caption, None where no annotator was scored
    num_first_answers = 0
    per_annotator = {}  # with annotator ids: id (the label's: _LABEL) -> the `Scores` of all their scored answers
    scored_answers = []  # without: the `Scores` of every scored answer
    token_sets, normalized_answers = _TokenSets(), _Normalized()
    for index, (label, annotators) in enumerate(zip(labels, additional_answers)):
        # The label first, as one more annotator, then the annotators in their order.
        kept_answers = [_kept_answers(texts, counts, normalized_answers) for texts in ([label], *annotators)]
        counts["num_annotators_left_out"] += kept_answers.count([])
        given = Counter(chain.from_iterable(kept_answers))
        num_given = given.total()
        holders = {}  # token -> the caption's distinct answers that hold it
        for answer in given:
            for token in token_sets[answer]:
                holders.setdefault(token, []).append(answer)
        first_answers = []
        for position, kept in enumerate(kept_answers):
            if not kept or len(kept) == num_given or (first_answers_only and position == 0):
                continue  # no answer, or no one else answered (or the label, whose answer is no first answer)
            scores = [_best_match_of_others(answer, given, kept, holders, token_sets) for answer in kept[:1]]
            if not first_answers_only:
                scores += [_best_match_of_others(answer, given, kept, holders, token_sets) for answer in kept[1:]]
                if annotator_ids is None:
                    scored_answers += scores
                else:
                    annotator = annotator_ids[index][position - 1] if position else _LABEL
                    per_annotator.setdefault(annotator, []).extend(scores)
            if position:
                first_answers.append(scores[0])
        num_first_answers += len(first_answers)
        per_caption.append(_mean_scores(first_answers) if first_answers else None)

    captions = [scores for scores in per_caption if scores]
    answers = [score for scores in per_annotator.values() for score in scores] if annotator_ids else scored_answers
    results = {}
    for metric in Scores._fields:
        mean, std = mean_std([getattr(scores, metric) for scores in captions])
        results[f"first_answers_per_caption_{metric}"] = mean
        results[f"first_answers_per_caption_{metric}_std"] = std
        if first_answers_only:
            continue
        mean, std = mean_std([getattr(score, metric) for score in answers])
        results[f"all_answers_per_answer_{metric}"] = mean
        results[f"all_answers_per_answer_{metric}_std_across_answers"] = std
        if annotator_ids is not None:
            means = [mean_std([getattr(score, metric) for score in scores]).mean for scores in per_annotator.values()]
            results[f"all_answers_per_answer_{metric}_std_across_annotators"] = mean_std(means).std
    results["num_captions"] = len(captions)
    results["num_first_answers"] = num_first_answers
    if not first_answers_only:
        results["num_answers"] = len(answers)
    if annotator_ids is not None and not first_answers_only:
        results["num_annotators"] = len(per_annotator)  # scored ones, the labels counting as one
    results.update(counts)
    if per_example:
        for metric in Scores._fields:
            results[f"first_answers_{metric}_per_caption"] = [getattr(s, metric) if s else None for s in per_caption]
    return results
