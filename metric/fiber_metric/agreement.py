"""Human agreement of the paper's Table 2 (leave one annotator out), as the FIBER release computed it."""

from itertools import chain
from typing import NamedTuple

import numpy as np

from .inputs import check_annotations
from .scores import Scores, _found, _runs, _segments, _Vocabulary
from .statistics import _mean, _segment_means, mean_std


# The label's key among annotator ids: it counts as one annotator across all blanks.
_LABEL = None
# Blanks scored at a time: memory that does not grow with the blanks (16 MB more at 100,000 blanks, against 500 MB all
# at once), and arrays that stay in the CPU's cache (2**13 ran faster than 2**11 and 2**15 on 2 CPUs).
_BLANKS_AT_ONCE = 2**13
_COUNTS = ("num_first_answers", "num_annotators_left_out", "num_empty_answers_dropped", "num_repeated_answers_dropped")


class _RepeatKeys(dict):
    """Answer -> the id of its text up to case and spacing, made on first use: as in the release, an annotator's
    answer that has the text of an earlier one up to case and spacing ("DOG" after "dog") is a repeat, while
    "Dog!" after "dog" is another answer, though both are scored as "dog"."""

    def __init__(self):
        super().__init__()
        self.key_ids = {}

    def __missing__(self, text):
        key_ids = self.key_ids
        answer_key = self[text] = key_ids.setdefault(" ".join(text.lower().split()), len(key_ids))
        return answer_key


def _lengths(lists):
    return np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))


def _counts_of(sorted_keys, counts, keys):
    """How many times each of `keys` was counted (`counts` of the ascending `sorted_keys`), 0 for a key not there."""
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=np.int64)
    found = _found(sorted_keys, keys)
    return np.where(found, counts[np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)], 0)


def _kept(flat_answers, answer_annotator, num_answers, vocabulary):
    """Which answers are kept: those that keep a token after normalization and repeat no earlier answer of their
    annotator (`_RepeatKeys`); with the ids of their normalized forms, and the numbers of the empty and repeated
    answers dropped."""
    ids = np.fromiter(map(vocabulary.__getitem__, flat_answers), dtype=np.int64, count=len(flat_answers))
    empty = vocabulary.normalized_ids.get("")
    non_empty = ids != empty if empty is not None else np.ones(len(ids), dtype=bool)
    kept = non_empty.copy()
    # Only an annotator's second or later answer can repeat: look among the non-empty answers of annotators who gave
    # several, and keep each text's first.
    several = np.flatnonzero(non_empty & (num_answers[answer_annotator] > 1))
    if len(several):
        repeat_keys = _RepeatKeys()
        keys = np.fromiter(map(repeat_keys.__getitem__, [flat_answers[index] for index in several.tolist()]), np.int64)
        _, firsts = np.unique(answer_annotator[several] * len(repeat_keys.key_ids) + keys, return_index=True)
        kept[several] = False
        kept[several[firsts]] = True
    num_empty = int(len(ids) - non_empty.sum())
    return kept, ids, num_empty, int(non_empty.sum() - kept.sum())


def _best_matches_of_others(scored, kept_ids, kept_annotators, kept_blanks, vocabulary):
    """EM and best token-set F1 of each `scored` kept answer against the kept answers of the other annotators of its
    blank (the label counting as one), in percent, as arrays.

    An answer matches exactly when its blank holds it more often than its own annotator does. Otherwise
    its F1 is the best over the blank's distinct answers that the other annotators give (held more often
    than by its annotator) and that share a token with it (0 when none does); each pair is found through
    the (blank, token) they share, never by comparing every pair.
    """
    num_ids = len(vocabulary.normalized_ids)
    tokens, starts, sizes = vocabulary.token_table()
    num_tokens = len(vocabulary.token_ids)
    # The blanks' distinct answers and how many annotators give each; and each annotator's own counts.
    blank_answers, blank_counts = np.unique(kept_blanks * num_ids + kept_ids, return_counts=True)
    own_answers, own_counts = np.unique(kept_annotators * num_ids + kept_ids, return_counts=True)
    answer_ids, annotators, blanks = kept_ids[scored], kept_annotators[scored], kept_blanks[scored]
    exact = _counts_of(blank_answers, blank_counts, blanks * num_ids + answer_ids) > _counts_of(
        own_answers, own_counts, annotators * num_ids + answer_ids
    )
    # Every (blank, token) of the blanks' distinct answers, sorted, and of the scored answers that do not match.
    distinct_ids, distinct_blanks = blank_answers % num_ids, blank_answers // num_ids
    entries, position = _segments(sizes[distinct_ids])
    entry_keys = distinct_blanks[entries] * num_tokens + tokens[starts[distinct_ids][entries] + position]
    order = np.argsort(entry_keys, kind="stable")
    entry_keys, entries = entry_keys[order], entries[order]
    unmatched = np.flatnonzero(~exact)
    own, position = _segments(sizes[answer_ids[unmatched]])
    own_keys = blanks[unmatched][own] * num_tokens + tokens[starts[answer_ids[unmatched]][own] + position]
    # Each shared (blank, token) gives one (scored answer, distinct answer) pair: a pair's count is their shared tokens.
    low = np.searchsorted(entry_keys, own_keys, side="left")
    shared = np.searchsorted(entry_keys, own_keys, side="right") - low
    first, offset = _segments(shared)
    pairs_scored = unmatched[own][first]
    pairs = pairs_scored * len(blank_answers) + entries[low[first] + offset]
    pairs, true_positives = np.unique(pairs, return_counts=True)
    pairs_scored, others = pairs // len(blank_answers), pairs % len(blank_answers)
    by_others = blank_counts[others] > _counts_of(
        own_answers, own_counts, annotators[pairs_scored] * num_ids + distinct_ids[others]
    )
    pairs_scored, others, true_positives = pairs_scored[by_others], others[by_others], true_positives[by_others]
    pair_f1 = 200 * true_positives / (sizes[answer_ids[pairs_scored]] + sizes[distinct_ids[others]])
    f1 = np.zeros(len(scored))
    if len(pairs_scored):
        runs, firsts, _ = _runs(pairs_scored)
        f1[runs] = np.maximum.reduceat(pair_f1, firsts)
    return np.where(exact, 100.0, 0.0), np.where(exact, 100.0, f1)


def _group_means(values, groups, num_groups):
    """The mean of `values` within each of `num_groups` groups (`groups`: ascending), as `_mean` takes it; None for an
    empty group."""
    sizes = np.bincount(groups, minlength=num_groups)
    return [mean if size else None for mean, size in zip(_segment_means(values, sizes).tolist(), sizes.tolist())]


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
    vocabulary = _Vocabulary()
    per_caption = {metric: [] for metric in Scores._fields}
    answers = {metric: [] for metric in Scores._fields}
    per_annotator = {}  # with annotator ids: id (the label's: _LABEL) -> the indices of their scored answers
    counts = dict.fromkeys(_COUNTS, 0)
    # A slice of the blanks at a time: the arrays stay small (in memory and in the CPU's cache) whatever the blanks.
    for start in range(0, len(labels), _BLANKS_AT_ONCE):
        stop = start + _BLANKS_AT_ONCE
        part = _scores_of_annotators(labels[start:stop], additional_answers[start:stop], first_answers_only, vocabulary)
        for metric in Scores._fields:
            per_caption[metric] += part.per_caption[metric]
        for name in _COUNTS:
            counts[name] += part.counts[name]
        if first_answers_only:
            continue
        if annotator_ids is not None:
            names = list(chain.from_iterable([_LABEL, *ids] for ids in annotator_ids[start:stop]))
            for index, annotator in enumerate(part.annotators, start=len(answers["f1"])):
                per_annotator.setdefault(names[annotator], []).append(index)
        for metric in Scores._fields:
            answers[metric] += part.answers[metric]
    results = {}
    for metric in Scores._fields:
        mean, std = mean_std([score for score in per_caption[metric] if score is not None])
        results[f"first_answers_per_caption_{metric}"] = mean
        results[f"first_answers_per_caption_{metric}_std"] = std
        if first_answers_only:
            continue
        mean, std = mean_std(answers[metric])
        results[f"all_answers_per_answer_{metric}"] = mean
        results[f"all_answers_per_answer_{metric}_std_across_answers"] = std
        if annotator_ids is not None:
            column = answers[metric]
            means = [_mean([column[index] for index in indices]) for indices in per_annotator.values()]
            results[f"all_answers_per_answer_{metric}_std_across_annotators"] = mean_std(means).std
    results["num_captions"] = sum(score is not None for score in per_caption["f1"])
    results["num_first_answers"] = counts.pop("num_first_answers")
    if not first_answers_only:
        results["num_answers"] = len(answers["f1"])
        if annotator_ids is not None:
            results["num_annotators"] = len(per_annotator)  # scored ones, the labels counting as one
    results.update(counts)
    if per_example:
        for metric in Scores._fields:
            results[f"first_answers_{metric}_per_caption"] = per_caption[metric]
    return results


class _AnnotatorScores(NamedTuple):
    per_caption: dict  # metric -> each caption's mean first-answer score (None where no annotator was scored)
    answers: dict  # metric -> the score of every scored answer (without `first_answers_only`)
    annotators: list  # the annotator of every scored answer: their index among the blanks' annotators, labels included
    counts: dict  # _COUNTS


def _scores_of_annotators(labels, additional_answers, first_answers_only, vocabulary):
    """The scores of the annotators of some blanks (see `human_agreement`), as `_AnnotatorScores`."""
    # Every blank's annotators, the label first as one more annotator (position 0), and their answers, flattened.
    annotators = [[[label], *answers] for label, answers in zip(labels, additional_answers)]
    num_annotators = _lengths(annotators)
    flat_annotators = list(chain.from_iterable(annotators))
    num_answers = _lengths(flat_annotators)
    flat_answers = list(chain.from_iterable(flat_annotators))
    annotator_blanks = np.repeat(np.arange(len(labels)), num_annotators)
    positions = _segments(num_annotators)[1]
    answer_annotators = np.repeat(np.arange(len(flat_annotators)), num_answers)
    kept, ids, num_empty, num_repeated = _kept(flat_answers, answer_annotators, num_answers, vocabulary)
    kept_annotators, kept_ids = answer_annotators[kept], ids[kept]
    kept_blanks = annotator_blanks[kept_annotators]
    num_kept = np.bincount(kept_annotators, minlength=len(flat_annotators))
    # An annotator is scored unless they kept no answer or no one else answered (and, for first answers only, the
    # label, whose answer is no first answer); each kept answer is scored, or its annotator's first only.
    num_given = np.bincount(kept_blanks, minlength=len(labels))
    scored_annotators = (num_kept > 0) & (num_kept != num_given[annotator_blanks])
    if first_answers_only:
        scored_annotators &= positions > 0
    ranks = _segments(num_kept)[1]
    scored = np.flatnonzero(scored_annotators[kept_annotators] & ((ranks == 0) | (not first_answers_only)))
    exact_match, f1 = _best_matches_of_others(scored, kept_ids, kept_annotators, kept_blanks, vocabulary)
    # First answers, per caption: the annotators' (not the label's) first answers, averaged within each caption.
    first = (ranks[scored] == 0) & (positions[kept_annotators[scored]] > 0)
    caption_of_first = kept_blanks[scored[first]]
    columns = {"exact_match": exact_match, "f1": f1}
    counts = {
        "num_first_answers": int(first.sum()),
        "num_annotators_left_out": int((num_kept == 0).sum()),
        "num_empty_answers_dropped": num_empty,
        "num_repeated_answers_dropped": num_repeated,
    }
    return _AnnotatorScores(
        {metric: _group_means(column[first], caption_of_first, len(labels)) for metric, column in columns.items()},
        {} if first_answers_only else {metric: column.tolist() for metric, column in columns.items()},
        [] if first_answers_only else kept_annotators[scored].tolist(),
        counts,
    )
