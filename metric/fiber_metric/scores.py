"""The FIBER metric's scores, one example at a time: normalization, exact match, token-set F1 (and the release's model
F1) against many correct answers, agreement-weighted accuracy, Correct@K and average precision of ranked candidates,
and `score_predictions`, what `compute` returns. These are the only scorers; they import neither `evaluate` nor the
FIBER package. Every score is in percent: an exact match is 0 or 100. Two answers that normalize to nothing (e.g.
"The!" and "") match, with EM and F1 100; against one that keeps a token, 0 (the release divided by zero there).
"""

import functools
import re
import string
import unicodedata

import numpy as np

from .inputs import _answers, _strings, check_predictions
from .statistics import _mean, confidence_interval, mean_std

_ARTICLE_OR_PUNCTUATION = re.compile(r"\b(?:a|an|the)\b|[" + re.escape(string.punctuation) + "]")
_METRICS = ("exact_match", "f1")


def normalize_answer(text):
    """Lower-cases, deletes ASCII punctuation and the words "a", "an", "the", collapses white space: in one pass, as
    the FIBER release did (whole words are found before punctuation goes, and nothing deleted leaves a space: "a-team"
    becomes "team", "water-filled" "waterfilled"). Text that is not ASCII is first put in NFKC form without format
    characters, so "café" with a combining accent, fullwidth "ｄｏｇ", "ﬁ" or a zero-width space read plainly.

    >>> normalize_answer("  The Water-filled   balloons!")
    'waterfilled balloons'
    >>> normalize_answer("\uff34\uff48\uff45 \ufb01sh\u200b!")  # fullwidth "The", the ligature fi, a zero-width space
    'fish'
    """
    if not text.isascii():
        text = "".join(char for char in unicodedata.normalize("NFKC", text) if unicodedata.category(char) != "Cf")
    return " ".join(_ARTICLE_OR_PUNCTUATION.sub("", text.lower()).split())


# A split's blanks share many answers, and every system meets the same ones: each text is normalized once.
@functools.lru_cache(maxsize=2**16)
def _normalized(text):
    """(normalized text, its set of tokens: F1 counts a repeated token once)."""
    normalized = normalize_answer(text)
    return normalized, frozenset(normalized.split())


@functools.lru_cache(maxsize=2**14)
def _correct(references):
    """A blank's correct answers (a tuple) normalized: the set of their texts, and their token sets."""
    normalized = [_normalized(answer) for answer in references]
    return {text for text, _ in normalized}, [tokens for _, tokens in normalized]


def _token_set_f1(tokens, other):
    """Token-set F1 in percent: TP / (TP + (FP + FN) / 2) = 2 TP / (|tokens| + |other|); two empty sets match."""
    return 200 * len(tokens & other) / (len(tokens) + len(other)) if tokens or other else 100.0


def _best_match(prediction, references):
    """(EM, best token-set F1) of one answer against its correct answers, in percent."""
    normalized, tokens = _normalized(prediction)
    texts, token_sets = _correct(tuple(references))
    if normalized in texts:
        return 100.0, 100.0
    return 0.0, max(_token_set_f1(tokens, other) for other in token_sets)


def exact_match(prediction, references):
    """100 if the normalized prediction equals any normalized reference, else 0.

    >>> exact_match("The Mountain.", ["cliff", "mountain"])
    100.0
    """
    return _best_match(_strings(prediction, "prediction", depth=0), _answers(references, "references"))[0]


def f1(prediction, references):
    """The best token-set F1 of the prediction against any of the references, in percent (0-100).

    >>> f1("icy mountain", ["mountain", "icy cliff"])
    66.66666666666667
    """
    return _best_match(_strings(prediction, "prediction", depth=0), _answers(references, "references"))[1]


def f1_release(prediction, references):
    """Token-set F1 as the FIBER release's code computed it for its models (`F1ScoreMany`, most likely behind the
    paper's Table 3 rows): raw answers split on white space, with case, articles and punctuation kept, the maximum over
    the answers, in percent; two empty answers match. `f1` is the paper's text's definition, and the one to report.

    >>> f1("The Mountain.", ["mountain"]), f1_release("The Mountain.", ["mountain"])
    (100.0, 0.0)
    >>> f1_release("a man a man", ["a man", "a woman"])
    100.0
    """
    tokens = frozenset(_strings(prediction, "prediction", depth=0).split())
    return max(_token_set_f1(tokens, frozenset(answer.split())) for answer in _answers(references, "references"))


def vqa_accuracy(prediction, annotators):
    """Agreement-weighted accuracy as VQA accuracy (Antol et al., 2015), in percent: min(1, annotators who gave the
    normalized answer / 3), averaged over the subsets that leave one annotator out. `annotators`: one list of answers
    per annotator, the label one more (`annotators_from_example`). Of 10, an answer 4 gave scores 100, one gave 30.

    >>> round(vqa_accuracy("a dog", [["dog"], ["a dog", "puppy"], ["Dog!"], ["cat"]]), 1)
    75.0
    >>> round(vqa_accuracy("puppy", [["dog"], ["a dog", "puppy"], ["Dog!"], ["cat"]]), 1)
    25.0
    """
    answer, annotators = _normalized(_strings(prediction, "prediction", 0))[0], _strings(annotators, "annotators", 2)
    if not annotators:
        raise ValueError("annotators is empty: the label counts as one")
    gave = sum(any(_normalized(given)[0] == answer for given in answers) for answers in annotators)
    # Leaving out one of the `gave` annotators leaves gave - 1 who gave it; leaving out another leaves all of them.
    return 100 * (gave * min(1, (gave - 1) / 3) + (len(annotators) - gave) * min(1, gave / 3)) / len(annotators)


def annotators_from_example(example):
    """The answers of one FIBER row by annotator, the label as one more annotator (first), for `vqa_accuracy`.

    >>> annotators_from_example({"label": "a dog", "additional_answers": [["dog", "a dog"], ["puppy"]]})
    [['a dog'], ['dog', 'a dog'], ['puppy']]
    """
    label = _strings(example.get("label"), "label", depth=0)
    return [[label], *_strings(example.get("additional_answers") or [], "additional_answers", depth=2)]


def _hits(candidates, references):
    """Whether each distinct normalized candidate, in rank order (a repeat counts at its first rank), is correct."""
    correct = {_normalized(answer)[0] for answer in references}
    return [normalized in correct for normalized in dict.fromkeys(_normalized(c)[0] for c in candidates)]


def _average_precision(hits):
    ranks = [rank for rank, hit in enumerate(hits, start=1) if hit]
    return _mean([100 * found / rank for found, rank in enumerate(ranks, start=1)])


def correct_at_k(candidates, references, k):
    """100 if one of the first `k` distinct candidates (after normalization) is a correct answer, else 0.

    >>> correct_at_k(["a tree", "Tree!", "cliff"], ["cliff", "mountain"], k=2)
    100.0
    """
    return 100.0 if any(_hits(_strings(candidates, "candidates"), _answers(references, "references"))[:k]) else 0.0


def average_precision(candidates, references):
    """Mean of Precision@k over the ranks k of correct distinct candidates, in percent; 0 when none is correct.

    >>> average_precision(["cliff", "a tree", "hill", "the Cliff"], ["cliff", "hill"])
    83.33333333333334
    """
    return _average_precision(_hits(_strings(candidates, "candidates"), _answers(references, "references")))


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
    return list(dict.fromkeys([label, *(answer for annotator in answers for answer in annotator)]))


def score_predictions(
    predictions, references, per_example=False, categories=None, candidates=None, labels=None, additional_answers=None,
    confidence_level=None, num_bootstrap=10_000, seed=0,
):
    """What `compute` returns (see its documentation), as a plain function.

    >>> score_predictions(["a mountain", "gym"], [["mountain", "cliff"], ["room"]])
    {'exact_match': 50.0, 'f1': 50.0, 'f1_release': 33.333333333333336}
    """
    predictions, references, categories, candidates, labels, additional_answers = check_predictions(
        predictions, references, categories, candidates, labels, additional_answers)
    columns = _columns(predictions, references)
    if labels is not None:
        label_only = _columns(predictions, [[label] for label in labels])
        columns.update({f"{name}_label_only": column for name, column in label_only.items()})
    if additional_answers is not None:
        columns["vqa_accuracy"] = [vqa_accuracy(prediction, [[label], *annotators])
                                   for prediction, label, annotators in zip(predictions, labels, additional_answers)]
    if candidates is not None:
        hits = [_hits(ranked, answers) for ranked, answers in zip(candidates, references)]
        for k in (2**power for power in range(max([1, *map(len, candidates)]).bit_length())):
            columns[("correct_at_k", str(k))] = [100.0 if any(found[:k]) else 0.0 for found in hits]
        columns["map"] = [_average_precision(found) for found in hits]
    summary = summarize(columns, categories, confidence_level, num_bootstrap, seed)
    by_category, intervals = summary.pop("by_category", {}), summary.pop("confidence_intervals", {})
    results = {**summary, **{f"{name}_ci": value for name, value in intervals.items()}}
    if per_example:
        results.update(_nested({name: column for name, column in columns.items() if name != "map"}, "_per_example"))
        if candidates is not None:
            results["average_precision_per_example"] = columns["map"]
    if categories is not None:
        results["count_by_category"] = {name: scores["count"] for name, scores in by_category.items()}
        for metric in _METRICS:
            results[f"{metric}_by_category"] = {name: scores[metric] for name, scores in by_category.items()}
            if confidence_level is not None:
                results[f"{metric}_ci_by_category"] = {name: scores["confidence_intervals"][metric]
                                                       for name, scores in by_category.items()}
    return results


def _columns(predictions, references):
    """Per-blank EM, F1 and the release's F1 against each blank's correct answers (a string: the label alone)."""
    matches = [_best_match(prediction, answers) for prediction, answers in zip(predictions, references)]
    return {"exact_match": [match[0] for match in matches], "f1": [match[1] for match in matches],
            "f1_release": [f1_release(prediction, answers) for prediction, answers in zip(predictions, references)]}


def summarize(columns, categories=None, confidence_level=None, num_bootstrap=10_000, seed=0):
    """The means of per-blank score `columns`, with `confidence_level` their bootstrap `confidence_intervals`, and with
    `categories` (one per blank) those of EM and F1 `by_category` (Table 4). A column is named by a metric ("f1") or a
    metric and a key (("correct_at_k", "1")), nested so in the summary.

    >>> summarize({"exact_match": [100.0, 0.0], ("correct_at_k", "1"): [100.0, 100.0]})
    {'exact_match': 50.0, 'correct_at_k': {'1': 100.0}}
    """
    summary = _nested({name: mean_std(column).mean for name, column in columns.items()})
    if confidence_level is not None:
        matrix = np.array(list(columns.values()), dtype=float).reshape(len(columns), -1).T
        intervals = confidence_interval(matrix, confidence_level, num_bootstrap, seed).tolist()
        summary["confidence_intervals"] = _nested(dict(zip(columns, intervals)))
    if categories is not None:
        summary["by_category"] = {}
        for name in sorted(set(categories)):
            rows = [row for row, category in enumerate(categories) if category == name]
            scores = {metric: [columns[metric][row] for row in rows] for metric in _METRICS}
            summary["by_category"][name] = {"count": len(rows), **summarize(scores, None, confidence_level,
                                                                            num_bootstrap, seed)}
    return summary


def _nested(values, suffix=""):
    """{"f1": x, ("correct_at_k", "1"): y} -> {"f1" + suffix: x, "correct_at_k" + suffix: {"1": y}}."""
    nested = {}
    for name, value in values.items():
        if isinstance(name, tuple):
            nested.setdefault(name[0] + suffix, {})[name[1]] = value
        else:
            nested[name + suffix] = value
    return nested
