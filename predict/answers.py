"""Each blank's answer and its ranked candidates, from a model's beams or the answers read in its replies.

As the paper (App. B.2): the first beam that is a noun phrase in the blank, else the first. The candidates recorded
and ranked (Correct@K, MAP) are the beams distinct after the metric's normalization ("a police officer", "A police
officer"), without those that normalize to nothing (a beam "a"); only when every beam does is the answer the first
beam, with no candidates. Training (`answers_and_candidates`) and `predict` (an `Answerer`) record them so.
"""
from collections.abc import Sequence
from dataclasses import dataclass

from fiberbench.metric import distinct_candidates
from fiberbench.modeling.decoding import choose_noun_phrases
from fiberbench.modeling.noun_phrases import load_spacy_pipeline, pipeline_name
from fiberbench.predict.replies import load_reader_pipeline, read_answers, reader_settings


def answers_and_candidates(masked_captions: Sequence[str], beams: Sequence[Sequence[str]], nlp=None):
    """Each blank's answer and its distinct candidates; with `nlp` the answer is the first candidate that is a noun
    phrase in the blank, else the first candidate (without `nlp`, the first)."""
    candidates = [distinct_candidates(ranked) for ranked in beams]
    choices = [distinct or list(ranked[:1]) for distinct, ranked in zip(candidates, beams)]
    answers = [ranked[0] for ranked in choices] if nlp is None else choose_noun_phrases(masked_captions, choices, nlp)
    return answers, candidates


@dataclass(frozen=True)
class Answerer:
    """What picks the answers of one run, and its settings as the predictions' metadata records them."""

    nlp: object = None  # the pipeline that picks the first noun-phrase beam; None: the first beam
    reader_nlp: object = None  # the pipeline of the answer reader's noun-phrase step; None: no such step
    prompted: bool = False  # the beams are replies in words, read by the answer reader
    num_beams: int = 1

    @classmethod
    def load(cls, num_beams: int, prompted: bool, only_noun_phrases: bool, read_noun_phrases, spacy_model):
        """The pipelines: of the first noun-phrase beam where there is a choice (beams), of the reader's noun-phrase
        step unless --no_read_noun_phrases (none loaded: a `UsageError`, never a reading without the step)."""
        nlp = load_spacy_pipeline(spacy_model) if only_noun_phrases and num_beams > 1 else None
        reader_nlp = load_reader_pipeline(spacy_model) if prompted and read_noun_phrases is not False else None
        return cls(nlp, reader_nlp, prompted, num_beams)

    @property
    def decoding(self) -> dict:  # the beam choice, as the `decoding` settings record it
        return {"only_noun_phrases": self.nlp is not None, "spacy_model": self.nlp and pipeline_name(self.nlp)}

    @property
    def reader(self) -> dict | None:  # the answer reader's settings (None: the paper's format)
        return reader_settings(self.reader_nlp) if self.prompted else None

    def fields(self, masked_captions: list[str], beams: list[list[str]]) -> list[dict]:
        """Each clip's fields in the predictions file: `prediction`, with several beams `candidates`, and for replies
        `raw` (the replies kept, which --reread reads again)."""
        candidates = beams
        if self.prompted:  # every reply (one per beam, in beam order) read at once
            read = iter(read_answers([reply for replies in beams for reply in replies],
                                     [caption for caption, replies in zip(masked_captions, beams) for _ in replies],
                                     self.reader_nlp))
            candidates = [[next(read) for _ in replies] for replies in beams]
        answers, distinct = answers_and_candidates(masked_captions, candidates, self.nlp)
        fields = [{"prediction": answer} | ({"candidates": ranked} if self.num_beams > 1 else {})
                  for answer, ranked in zip(answers, distinct)]
        return [field | {"raw": list(replies)} for field, replies in zip(fields, beams)] if self.prompted else fields
