"""The prompt template's check and the answer extraction of language models' replies."""

import pytest

from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template, extract_answer


@pytest.mark.parametrize(
    "reply, answer",
    [
        ("a guitar", "a guitar"),
        ("a guitar.", "a guitar"),
        (" The dog!\n", "The dog"),
        ('"a red ball"', "a red ball"),
        ("“a red ball”.", "a red ball"),
        ("'the cat'.", "the cat"),
        ("\n\n  a cake\nbecause the man is baking", "a cake"),
        ("the U.S. flag", "the U.S. flag"),
        ("", ""),
        ("  \n ", ""),
    ],
)
def test_the_answer_is_the_first_line_without_quotes_or_final_punctuation(reply, answer):
    assert extract_answer(reply) == answer


def test_the_default_prompt_is_a_valid_template():
    assert check_template(DEFAULT_PROMPT) == DEFAULT_PROMPT
    assert "{masked_caption}" in DEFAULT_PROMPT


@pytest.mark.parametrize(
    "template, message",
    [
        ("Fill the blank.", "must contain {masked_caption}"),
        ("{masked_caption} {label}", "may only use {masked_caption}, got {label}"),
        ("{caption}", "must contain {masked_caption}"),
        ("{masked_caption} {", "not a valid template"),
    ],
)
def test_bad_templates(template, message):
    with pytest.raises(ValueError, match=message):
        check_template(template)


def test_literal_braces_are_doubled():
    assert (
        check_template('{{"caption": "{masked_caption}"}}').format(masked_caption="x _____") == '{"caption": "x _____"}'
    )
