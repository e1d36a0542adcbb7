"""Prompts for language models that were not trained on FIBER, and how an answer is read from what they generate."""

import string

# Asks for the missing phrase alone, so that the first line of the reply is the answer.
DEFAULT_PROMPT = (
    "Fill in the blank (_____) in this caption of a video. Reply with only the missing noun phrase.\n"
    "Caption: {masked_caption}\n"
    "Missing noun phrase:"
)
PROMPT_FIELD = "masked_caption"

# Stripped from the ends of an answer: white space and quotes on both sides, final punctuation at the end.
QUOTES = "\"'`“”‘’«»"
FINAL_PUNCTUATION = ".,;:!?"


def check_template(template: str) -> str:
    """The template if it is usable: it must hold `{masked_caption}` and no other field.

    Raises:
        ValueError: with the reason (a missing field, another field, a lone brace).
    """
    try:
        fields = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    except ValueError as error:
        raise ValueError(
            f"--prompt is not a valid template ({error}); write a literal brace as {{{{ or }}}}"
        ) from error
    if PROMPT_FIELD not in fields:
        raise ValueError(f"--prompt must contain {{{PROMPT_FIELD}}}, where each clip's masked caption goes")
    if fields != {PROMPT_FIELD}:
        others = ", ".join(sorted("{" + field + "}" for field in fields - {PROMPT_FIELD}))
        raise ValueError(
            f"--prompt may only use {{{PROMPT_FIELD}}}, got {others}; write a literal brace as {{{{ or }}}}"
        )
    return template


def extract_answer(generated: str) -> str:
    """The answer in a language model's reply: its first non-empty line, without quotes around it or final punctuation.

    'a guitar.' -> 'a guitar'; '"the dog"\\nBecause ...' -> 'the dog'; an empty reply -> ''.
    """
    first_line = next((line for line in generated.splitlines() if line.strip()), "")
    return first_line.strip(QUOTES + string.whitespace).rstrip(QUOTES + FINAL_PUNCTUATION + string.whitespace)
