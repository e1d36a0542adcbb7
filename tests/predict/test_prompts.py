"""The prompt template's check (the answers in replies: test_replies.py)."""

import pytest

from fiberbench.predict.prompts import DEFAULT_PROMPT, check_template


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
