"""Each blank's answer and its ranked candidates: from a model's beams, or from the answers read in its replies.

The paper answers with the first beam that is a noun phrase in the blank, else the first beam
(App. B.2). Its beams may repeat an answer in another spelling ("a police officer", "A police
officer") or hold one that normalizes to nothing (a beam "a"), which names nothing: the candidates
recorded and ranked (Correct@K, MAP) are the distinct answers after the metric's normalization
(`distinct_candidates`), and the answer is chosen among them. Only when every beam normalizes to
nothing is the answer the first beam, with no candidates. Training records its answers so
(`answers_and_candidates`), and so does `fiberbench predict`.

`fiberbench predict` (a run, and --reread, which reads kept replies again) picks them with an
`Answerer`, loaded once per run with its spaCy pipelines (the paper's first noun-phrase beam; the
answer reader's noun-phrase step, `fiberbench.predict.replies`) and the settings they are recorded as; it
gives each clip's fields in the predictions file (`Answerer.fields`, through `answer_fields`).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fiberbench.predict.replies import load_reader_pipeline, read_answers, reader_settings

if TYPE_CHECKING:
    from spacy.language import Language


def answers_and_candidates(
    masked_captions: Sequence[str], beams: Sequence[Sequence[str]], nlp=None
) -> tuple[list[str], list[list[str]]]:
    """Each blank's answer and its distinct candidates; with `nlp` the answer is the first candidate that is a noun
    phrase in the blank, else the first candidate (without `nlp`, the first)."""
    from fiberbench.metric import distinct_candidates

    candidates = [distinct_candidates(ranked) for ranked in beams]
    choices = [distinct or list(ranked[:1]) for distinct, ranked in zip(candidates, beams)]
    if nlp is None:
        answers = [ranked[0] for ranked in choices]
    else:
        # The model's package (its import loads torch and transformers), only where a noun phrase is chosen.
        from fiberbench.modeling.decoding import choose_noun_phrases

        answers = choose_noun_phrases(masked_captions, choices, nlp)
    return answers, candidates


@dataclass(frozen=True)
class Answerer:
    """What picks the answers of one run, and how it is recorded in the predictions' settings."""

    nlp: "Language | None" = None  # the spaCy pipeline that picks the first noun-phrase beam; None: the first beam
    reader_nlp: "Language | None" = None  # the pipeline of the answer reader's noun-phrase step; None: no such step
    prompted: bool = False  # the beams are replies in words, read by the answer reader
    decoding: dict = field(default_factory=dict)  # the noun-phrase beam choice, as the `decoding` settings record it
    reader: dict | None = None  # the answer reader's settings (None: the model answers in the paper's format)

    @classmethod
    def load(
        cls,
        num_beams: int,
        prompted: bool,
        *,
        only_noun_phrases: bool,
        read_noun_phrases: bool | None,
        spacy_model: str | None,
    ) -> "Answerer":
        """The answerer of a run with `num_beams` beams (replies in words when `prompted`) and these flags.

        The first noun-phrase beam needs a pipeline only when there is a choice to make (several
        beams). The reader's noun-phrase step is for models that reply in words, unless
        --no_read_noun_phrases; where no pipeline can be loaded for it, a UsageError says so (never
        a silent reading without the step, which gives other answers).
        """
        nlp, decoding = None, {"only_noun_phrases": False, "spacy_model": None}
        if only_noun_phrases and num_beams > 1:
            # The model's package (its import loads torch and transformers), only where there is a choice: a --reread
            # or a one-beam run without the reader's step loads neither.
            from fiberbench.modeling.noun_phrases import load_spacy_pipeline, pipeline_name

            nlp = load_spacy_pipeline(spacy_model)
            decoding = {"only_noun_phrases": True, "spacy_model": pipeline_name(nlp)}
        reader_nlp, reader = None, None
        if prompted:
            reader_nlp = None if read_noun_phrases is False else load_reader_pipeline(spacy_model)
            reader = reader_settings(reader_nlp)
        return cls(nlp=nlp, reader_nlp=reader_nlp, prompted=prompted, decoding=decoding, reader=reader)

    def fields(self, masked_captions: list[str], beams: "list[list[str]]") -> list[dict]:
        """Each clip's fields in the predictions file, from its beams: its replies (kept as `raw`) when `prompted`,
        else its answers."""
        if not self.prompted:
            return answer_fields(masked_captions, beams, self.nlp)
        # The answer reader reads every reply (one per beam, in beam order) at once.
        answers = iter(
            read_answers(
                [reply for replied in beams for reply in replied],
                [caption for caption, replied in zip(masked_captions, beams) for _ in replied],
                self.reader_nlp,
            )
        )
        candidates = [[next(answers) for _ in replied] for replied in beams]
        return answer_fields(masked_captions, candidates, self.nlp, beams)


def answer_fields(
    masked_captions: list[str], candidates: "list[list[str]]", nlp, replies: "list[list[str]] | None" = None
) -> list[dict]:
    """Each clip's `prediction` and `candidates` in a predictions file, and its replies as `raw` when they are given.

    The answer and the candidates are as training records them (`answers_and_candidates`): the
    distinct answers after the metric's normalization, and with `nlp` the first of them that is a
    noun phrase in the blank (the paper's choice), else the first.
    """
    answers, distinct = answers_and_candidates(masked_captions, candidates, nlp)
    fields = [{"prediction": answer, "candidates": ranked} for answer, ranked in zip(answers, distinct)]
    if replies is not None:
        fields = [field | {"raw": replied} for field, replied in zip(fields, replies)]
    return fields
