"""The paper's most-frequent-answer baseline (Table 3): one answer, learnt from the training labels, for every blank."""

from collections import Counter

from . import normalize_answer


def most_frequent_answer(labels: list[str]) -> str:
    """The training set's most frequent label after normalization ("a man" in the paper).

    Labels are counted by their normalized form, so "A man" and "a man" count together; the
    answer returned is the most common spelling of the winning form. Ties go to the form seen
    first, so the result does not depend on hash order.
    """
    if not labels:
        raise ValueError("The most-frequent-answer baseline needs a non-empty training split.")
    by_form = Counter(normalize_answer(label) for label in labels)
    winner = by_form.most_common(1)[0][0]
    spellings = Counter(label for label in labels if normalize_answer(label) == winner)
    return spellings.most_common(1)[0][0]
