"""A model's answer to each blank and its ranked candidates, from its beams: what training and `predict` record.

The paper answers with the first beam that is a noun phrase in the blank, else the first beam
(App. B.2). Its beams may repeat an answer in another spelling ("a police officer", "A police
officer") or hold one that normalizes to nothing (a beam "a"), which names nothing: the candidates
recorded and ranked (Correct@K, MAP) are the distinct answers after the metric's normalization
(`distinct_candidates`), and the answer is chosen among them. Only when every beam normalizes to
nothing is the answer the first beam, with no candidates.
"""

from collections.abc import Sequence


def answers_and_candidates(
    masked_captions: Sequence[str], beams: Sequence[Sequence[str]], nlp=None
) -> tuple[list[str], list[list[str]]]:
    """Each blank's answer and its distinct candidates; with `nlp` the answer is the first candidate that is a noun
    phrase in the blank, else the first candidate (without `nlp`, the first)."""
    from fiberbench.metric import distinct_candidates
    from fiberbench.modeling.decoding import choose_noun_phrases

    candidates = [distinct_candidates(ranked) for ranked in beams]
    choices = [distinct or list(ranked[:1]) for distinct, ranked in zip(candidates, beams)]
    if nlp is None:
        answers = [ranked[0] for ranked in choices]
    else:
        answers = choose_noun_phrases(masked_captions, choices, nlp)
    return answers, candidates
