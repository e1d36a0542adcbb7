"""How `fiberbench predict` picks each clip's answer: from a model's beams, or from the answers read in its replies.

The same code for a run and for --reread (which reads kept replies again): the spaCy pipelines
(`noun_phrase_pipeline` for the paper's first noun-phrase beam, `reader_pipeline` for the answer
reader's noun-phrase step), the answer reader over every reply (`read_replies`), and a clip's
fields in the predictions file (`answer_fields`).
"""

from typing import TYPE_CHECKING

from fiberbench.replies import load_reader_pipeline, read_answers

if TYPE_CHECKING:
    from .settings import PredictSettings


def noun_phrase_pipeline(settings: "PredictSettings", num_beams: int):
    """The spaCy pipeline that picks the first noun-phrase beam, or None when there is no choice to make."""
    if not (settings.only_noun_phrases and num_beams > 1):
        return None
    from fiberbench.modeling.noun_phrases import load_spacy_pipeline

    return load_spacy_pipeline(settings.spacy_model)


def reader_pipeline(settings: "PredictSettings", prompted: bool):
    """The spaCy pipeline of the answer reader's noun-phrase step, or None: for models that answer in the paper's
    format, and with --no_read_noun_phrases.

    Where none can be loaded, a UsageError says so (never a silent reading without the step,
    which gives other answers): install one, or pass --no_read_noun_phrases.
    """
    if not prompted or settings.read_noun_phrases is False:
        return None
    return load_reader_pipeline(settings.spacy_model)


def noun_phrase_settings(nlp) -> dict:
    """The decoding settings of the noun-phrase beam choice (`nlp` None: the first beam)."""
    from fiberbench.modeling.noun_phrases import pipeline_name

    return {"only_noun_phrases": nlp is not None, "spacy_model": None if nlp is None else pipeline_name(nlp)}


def read_replies(replies: "list[list[str]]", masked_captions: list[str], nlp) -> list[list[str]]:
    """Each clip's answers read from its replies (one per beam, in beam order) by the answer reader."""
    answers = iter(
        read_answers(
            [reply for replied in replies for reply in replied],
            [caption for caption, replied in zip(masked_captions, replies) for _ in replied],
            nlp,
        )
    )
    return [[next(answers) for _ in replied] for replied in replies]


def answer_fields(
    masked_captions: list[str], candidates: "list[list[str]]", nlp, replies: "list[list[str]] | None" = None
) -> list[dict]:
    """Each clip's `prediction` and `candidates` in a predictions file, and its replies as `raw` when they are given.

    The answer and the candidates are as training records them (`fiberbench.answers`): the
    distinct answers after the metric's normalization, and with `nlp` the first of them that is a
    noun phrase in the blank (the paper's choice), else the first.
    """
    from fiberbench.answers import answers_and_candidates

    answers, distinct = answers_and_candidates(masked_captions, candidates, nlp)
    fields = [{"prediction": answer, "candidates": ranked} for answer, ranked in zip(answers, distinct)]
    if replies is not None:
        fields = [field | {"raw": replied} for field, replied in zip(fields, replies)]
    return fields
