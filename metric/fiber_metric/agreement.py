"""Human agreement of the paper's Table 2 (leave one annotator out), as the FIBER release computed it."""

from collections import Counter
from itertools import chain

from .inputs import check_annotations
from .scores import Scores, _Normalized, _TokenSets
from .statistics import _mean, mean_std


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
