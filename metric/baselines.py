"""The paper's most-frequent-answer baseline (Table 3): one answer, learnt from the training labels, for every blank."""

from collections import Counter

from fiberbench.errors import DataError

from . import normalize_answer


def most_frequent_answer(labels: list[str]) -> str:
    """The training set's most frequent label after normalization ("a man" in the paper), in its most common spelling;
    ties go to the form seen first, so the result does not depend on hash order."""
    if not labels:
        raise DataError("The most-frequent-answer baseline needs a non-empty training split.")
    winner = Counter(normalize_answer(label) for label in labels).most_common(1)[0][0]
    return Counter(label for label in labels if normalize_answer(label) == winner).most_common(1)[0][0]
