"""The FIBER metric's scores: answer normalization, exact match and token-set F1 against many correct
answers, Correct@K and average precision of ranked candidates, and `score_predictions`, what the
module's `compute` returns.

fiber_metric.py, the `evaluate` module, is a thin class around the plain functions of this folder:
these, the input checks (inputs.py), the statistics over per-blank scores (statistics.py: bootstrap
intervals, paired tests) and human agreement (agreement.py). They import neither `evaluate` nor
`datasets` (importing `evaluate` imports transformers' pipelines, hence torch, and takes seconds),
so `fiberbench evaluate` and any script can score with them directly. Like the rest of this folder,
they import nothing from the FIBER package: the folder is pushed to the Hub as it is.

Every score is in percent (0-100), per example as well as averaged: an exact match is 0 or 100.
Answers that normalize to nothing (e.g. "The!" or ""): two such answers match, with EM 100 and
F1 100; against an answer that keeps at least one token, EM and F1 are 0. (The FIBER release
divided by zero in the first case.)
"""

import re
import string
import threading
import unicodedata
from itertools import chain
from typing import NamedTuple

import numpy as np

from .inputs import _answers, _check_same_length, _list, _plain_strings, _strings, check_predictions
from .statistics import _mean, _segment_means, confidence_interval, mean_std

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


class _Vocabulary(dict):
    """Text -> the id of `normalize_answer(text)`, made on first use, over every distinct normalized answer seen,
    with its distinct tokens as token ids.

    Each distinct text is normalized once, and texts that normalize alike share an id. An answer's
    tokens are kept sorted, in one flat list (`tokens`, the answer's from `starts[id]` to
    `starts[id + 1]`), so a column of answers can be compared token by token in numpy. (One object,
    not a vocabulary and a text map pointing at each other: such a cycle kept millions of strings
    alive until Python's cycle collector ran, two seconds at the end of a 100,000-blank evaluation.)
    """

    def __init__(self):
        super().__init__()
        self.normalized_ids = {}
        self.token_ids = {}
        self.tokens, self.starts = [], [0]
        # The leaderboard scores submissions in threads against one split's answers: an id and its tokens are added
        # together, or `starts` would point at another answer's tokens.
        self._adding = threading.Lock()

    def __missing__(self, text):
        answer_id = self[text] = self.id(normalize_answer(text))
        return answer_id

    def id(self, normalized):
        """The id of a normalized answer, given one (with its tokens) on first sight."""
        answer_id = self.normalized_ids.get(normalized)
        if answer_id is None:
            with self._adding:
                answer_id = self.normalized_ids.get(normalized)
                if answer_id is None:
                    token_ids = self.token_ids
                    self.tokens += sorted({token_ids.setdefault(token, len(token_ids)) for token in normalized.split()})
                    self.starts.append(len(self.tokens))
                    answer_id = self.normalized_ids[normalized] = len(self.normalized_ids)
        return answer_id

    def token_table(self):
        """(flat token ids, start of each answer's tokens, number of tokens of each answer) as arrays."""
        starts = np.array(self.starts, dtype=np.int64)
        return np.array(self.tokens, dtype=np.int64), starts, np.diff(starts)


def _segments(lengths):
    """For segments of `lengths` laid end to end: each item's segment and its position in it."""
    segment = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.cumsum(lengths) - lengths
    return segment, np.arange(len(segment)) - starts[segment]


def _found(sorted_keys, keys, possible=True):
    """Which of `keys` are in `sorted_keys` (an ascending array); `possible`: False where a key cannot be."""
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool)
    found = sorted_keys[np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)] == keys
    return found & possible


def _runs(values):
    """The runs of equal values of a sorted array: each run's value, its first index and its length."""
    firsts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]])) if len(values) else values[:0]
    return values[firsts], firsts, np.diff(np.append(firsts, len(values)))


class CorrectAnswers:
    """The correct answers of a list of blanks, checked and normalized once, to score any number of answer lists.

    `score_predictions` scores through it; so does `fiberbench evaluate`, for several systems on the
    same blanks without normalizing the same correct answers again for each. Scores are computed
    for all the blanks at once, in numpy, over the answers' token ids; each is the same number, to
    the last bit, as the per-answer functions (`exact_match`, `f1`, `average_precision`) give.

    >>> correct = CorrectAnswers([["mountain", "icy cliff"], ["room"]])
    >>> correct.score(["icy mountain", "The room!"])
    {'exact_match': [0.0, 100.0], 'f1': [66.66666666666667, 100.0]}
    >>> correct.score(["a hill", "a gym"], candidates=[["hill", "Icy cliff!"], ["gym"]])["average_precision"]
    [50.0, 0.0]
    """

    def __init__(self, references):
        references = _list(references, "references")
        if not (_plain_strings(references, 2) and all(references)):  # checked at once; blank by blank for the error
            references = [_answers(answers, "references", i) for i, answers in enumerate(references)]
        self._vocabulary = _Vocabulary()
        num_answers = np.fromiter(map(len, references), dtype=np.int64, count=len(references))
        ids = self._vocabulary.__getitem__
        answer_ids = np.fromiter(map(ids, chain.from_iterable(references)), dtype=np.int64, count=num_answers.sum())
        # Every blank's distinct correct answers (their ids) as sorted (blank, answer) keys: the pairs, blank after
        # blank, and, to look ranked candidates up, their keys.
        self._num_ids = len(self._vocabulary.normalized_ids)
        # (Sorted and cut into runs: numpy 2's `np.unique` hashes integer keys, ten times slower here.)
        self._correct_keys = _runs(np.sort(np.repeat(np.arange(len(references)), num_answers) * self._num_ids + answer_ids))[0]
        self._pair_blanks, self._correct_ids = np.divmod(self._correct_keys, max(self._num_ids, 1))
        self._num_correct = np.bincount(self._pair_blanks, minlength=len(references))
        self._first_pairs = np.cumsum(self._num_correct) - self._num_correct
        # Each pair's tokens, as (blank, token) keys: a prediction shares a token with a correct answer where
        # its own (blank, token) key is the same.
        tokens, starts, sizes = self._vocabulary.token_table()
        self._correct_sizes = sizes[self._correct_ids]
        self._entry_pairs, position = _segments(self._correct_sizes)
        entry_tokens = tokens[starts[self._correct_ids][self._entry_pairs] + position]
        self._num_tokens = len(self._vocabulary.token_ids)  # tokens no correct answer holds count only in sizes
        self._entry_keys = self._pair_blanks[self._entry_pairs] * self._num_tokens + entry_tokens
        # Sorted (with their pairs), they are looked up in order, which numpy's binary search does several times faster.
        order = np.argsort(self._entry_keys, kind="stable")
        self._entry_keys, self._entry_pairs = self._entry_keys[order], self._entry_pairs[order]

    def __len__(self):
        return len(self._num_correct)

    def score(self, predictions, candidates=None):
        """Per-blank scores of `predictions` (one answer per blank), in percent, in blank order.

        Returns {"exact_match": [...], "f1": [...]}; with `candidates` (every blank's ranked answers,
        best first) also "correct_at_k" (K = 1, 2, 4, ... up to the longest list, as strings, to
        lists) and "average_precision". Errors name the index, as in `score_predictions`.
        """
        predictions = _strings(predictions, "predictions")
        _check_same_length("predictions", predictions, "references", self._num_correct)
        ids = self._vocabulary
        predicted = np.fromiter(map(ids.__getitem__, predictions), dtype=np.int64, count=len(predictions))
        matches = self._correct_ids == predicted[self._pair_blanks]
        exact = np.maximum.reduceat(matches, self._first_pairs) if len(predicted) else np.zeros(0, dtype=bool)
        # Token-set F1 of every (blank, correct answer) pair: 2 TP / (|prediction| + |answer|), in exact integers
        # up to the one division, as the per-answer `f1` computes it. Its denominator is 0 only when both
        # normalize to "", an exact match.
        tokens, starts, sizes = self._vocabulary.token_table()
        blanks, position = _segments(sizes[predicted])
        predicted_tokens = tokens[starts[predicted][blanks] + position]
        known = predicted_tokens < self._num_tokens
        predicted_keys = blanks[known] * self._num_tokens + predicted_tokens[known]  # sorted: blank, then token
        shared = _found(predicted_keys, self._entry_keys)
        true_positives = np.bincount(self._entry_pairs[shared], minlength=len(self._correct_ids))
        with np.errstate(divide="ignore", invalid="ignore"):
            pair_f1 = 200 * true_positives / (sizes[predicted][self._pair_blanks] + self._correct_sizes)
        f1 = np.maximum.reduceat(pair_f1, self._first_pairs) if len(predicted) else np.zeros(0)
        scores = {"exact_match": np.where(exact, 100.0, 0.0).tolist(), "f1": np.where(exact, 100.0, f1).tolist()}
        if candidates is not None:
            candidates = _strings(candidates, "candidates", depth=2)
            _check_same_length("predictions", predictions, "candidates", candidates)
            scores.update(self._ranking_scores(candidates))
        return scores

    def _ranking_scores(self, candidates):
        """Correct@K and average precision of every blank's ranked candidates (see `score`)."""
        ids = self._vocabulary.__getitem__
        num_given = np.fromiter(map(len, candidates), dtype=np.int64, count=len(candidates))
        given_ids = np.fromiter(map(ids, chain.from_iterable(candidates)), dtype=np.int64, count=num_given.sum())
        given_blanks = np.repeat(np.arange(len(candidates)), num_given)
        # Each blank's distinct candidates at their first ranks: the first of each (blank, answer) key, in rank order.
        _, firsts = np.unique(given_blanks * len(self._vocabulary.normalized_ids) + given_ids, return_index=True)
        firsts.sort()
        candidate_ids = given_ids[firsts]
        lengths = np.bincount(given_blanks[firsts], minlength=len(candidates))
        blanks, ranks = _segments(lengths)
        hits = _found(self._correct_keys, blanks * self._num_ids + candidate_ids, candidate_ids < self._num_ids)
        # Precision@rank at each rank holding a correct candidate, (hits up to it) / rank, as `_average_precision`.
        hits_before = np.concatenate([[0], np.cumsum(hits)])
        hits_up_to = (hits_before[1:] - hits_before[np.cumsum(lengths) - lengths][blanks])[hits]
        precisions = 100 * hits_up_to / (ranks[hits] + 1)
        hit_blanks, first_hits, num_hits = _runs(blanks[hits])
        first_rank = np.full(len(candidates), np.iinfo(np.int64).max)
        first_rank[hit_blanks] = ranks[hits][first_hits]
        average_precision = np.zeros(len(candidates))
        # Each blank's mean through `_mean` (an exactly rounded sum), as the per-answer function takes it.
        average_precision[hit_blanks] = _segment_means(precisions, num_hits)
        longest = int(num_given.max(initial=0))
        ks = [2**power for power in range(max(longest, 1).bit_length())]
        return {
            "correct_at_k": {str(k): np.where(first_rank < k, 100.0, 0.0).tolist() for k in ks},
            "average_precision": average_precision.tolist(),
        }


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
    return list(dict.fromkeys(_label_then_answers(label, answers)))


def references_from_columns(labels, additional_answers):
    """`references_from_example` of every row of a split given as two columns, repeats kept (`CorrectAnswers` finds
    them after normalization): each column is checked at once, with no Python check per row.

    >>> references_from_columns(["a dog"], [[["dog", "a dog"], ["puppy"]]])
    [['a dog', 'dog', 'a dog', 'puppy']]
    """
    labels = _strings(labels, "labels")
    additional_answers = _strings(additional_answers, "additional_answers", depth=3)
    _check_same_length("labels", labels, "additional_answers", additional_answers)
    return [_label_then_answers(label, answers) for label, answers in zip(labels, additional_answers)]


def _label_then_answers(label, answers):
    """A row's correct answers in order: its label, then every annotator's answers."""
    return [label, *chain.from_iterable(answers)]



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



def _confidence_intervals_by_name(columns, confidence_level, num_bootstrap, seed):
    """Name -> [low, high] of named columns of per-blank scores."""
    matrix = np.array(list(columns.values()), dtype=float).reshape(len(columns), -1).T
    intervals = confidence_interval(matrix, confidence_level, num_bootstrap, seed)
    return {name: [float(low), float(high)] for name, (low, high) in zip(columns, intervals)}
