"""Human agreement of the paper's Table 2 (leave one annotator out), as the FIBER release computed it."""

from .inputs import check_annotations
from .scores import _best_match, _normalized
from .statistics import _mean, mean_std

_METRICS = ("exact_match", "f1")


def _kept_answers(answers, counts):
    """An annotator's answers that keep a token, each text once: as in the release, "DOG" after "dog" repeats it,
    while "Dog!" is another answer, though both are scored as "dog"."""
    kept, seen = [], set()
    for answer in answers:
        if not _normalized(answer)[0]:
            counts["num_empty_answers_dropped"] += 1
        elif (key := " ".join(answer.lower().split())) in seen:
            counts["num_repeated_answers_dropped"] += 1
        else:
            seen.add(key)
            kept.append(answer)
    return kept


def human_agreement(labels, additional_answers, annotator_ids=None, per_example=False, first_answers_only=False):
    """Human agreement of the paper's Table 2 (leave one annotator out), as the FIBER release computed it: answers that
    normalize to nothing are dropped, a repeated answer (the same text up to case and spacing) counts once, and an
    answer is scored (EM, best F1) against every other annotator's answers, the label one more annotator.

    - First answers, per caption: the mean over a caption's annotators of their first answer's scores, then the mean
      and population deviation over captions (`per_example`: each caption's, None where no one was scored);
      `first_answers_only` gives these alone (`fiberbench evaluate`'s human row).
    - All answers, per answer: the mean over every scored answer and label; the deviation across answers, and with
      `annotator_ids` (for every blank, the id of each annotator) the paper's: across annotators' means.

    >>> results = human_agreement(["a dog"], [[["dog", "puppy"], ["The!", "a puppy"], ["cat"]]])
    >>> results["first_answers_per_caption_exact_match"], results["all_answers_per_answer_exact_match"]
    (66.66666666666667, 80.0)
    """
    labels, additional_answers, annotator_ids = check_annotations(labels, additional_answers, annotator_ids)
    per_caption = {metric: [] for metric in _METRICS}
    every_answer = {metric: [] for metric in _METRICS}
    by_annotator = {}  # with annotator ids: id (the labels': None) -> the scores of their answers
    counts = dict.fromkeys(("num_annotators_left_out", "num_empty_answers_dropped", "num_repeated_answers_dropped"), 0)
    num_first_answers = 0
    for blank, (label, annotators) in enumerate(zip(labels, additional_answers)):
        kept = [_kept_answers(answers, counts) for answers in [[label], *annotators]]  # the label first, as one more
        counts["num_annotators_left_out"] += sum(not answers for answers in kept)
        names = [None, *annotator_ids[blank]] if annotator_ids is not None else None
        firsts = []
        for position, answers in enumerate(kept):
            others = [answer for other, theirs in enumerate(kept) if other != position for answer in theirs]
            if not answers or not others or (first_answers_only and position == 0):
                continue
            for rank, answer in enumerate(answers[:1] if first_answers_only else answers):
                scores = _best_match(answer, others)
                if rank == 0 and position > 0:
                    firsts.append(scores)
                if not first_answers_only:
                    for metric, score in zip(_METRICS, scores):
                        every_answer[metric].append(score)
                    if names is not None:
                        by_annotator.setdefault(names[position], []).append(scores)
        num_first_answers += len(firsts)
        for index, metric in enumerate(_METRICS):
            per_caption[metric].append(_mean([scores[index] for scores in firsts]) if firsts else None)
    results = {}
    for index, metric in enumerate(_METRICS):
        mean, std = mean_std([score for score in per_caption[metric] if score is not None])
        results[f"first_answers_per_caption_{metric}"] = mean
        results[f"first_answers_per_caption_{metric}_std"] = std
        if first_answers_only:
            continue
        mean, std = mean_std(every_answer[metric])
        results[f"all_answers_per_answer_{metric}"] = mean
        results[f"all_answers_per_answer_{metric}_std_across_answers"] = std
        if annotator_ids is not None:
            means = [_mean([scores[index] for scores in answers]) for answers in by_annotator.values()]
            results[f"all_answers_per_answer_{metric}_std_across_annotators"] = mean_std(means).std
    results["num_captions"] = sum(score is not None for score in per_caption["f1"])
    results["num_first_answers"] = num_first_answers
    if not first_answers_only:
        results["num_answers"] = len(every_answer["f1"])
        if annotator_ids is not None:
            results["num_annotators"] = len(by_annotator)  # scored ones, the labels counting as one
    results.update(counts)
    if per_example:
        for metric in _METRICS:
            results[f"first_answers_{metric}_per_caption"] = per_caption[metric]
    return results
