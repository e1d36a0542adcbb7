"""The prompt of the models that reply in words (causal and video-language), and its check; the FIBER lmms-eval task
imports both, with the reader of the replies (`replies`)."""

import string

# Asks for the missing phrase alone; what a model replies instead is read by `replies.read_answer`.
DEFAULT_PROMPT = (
    "Fill in the blank (_____) in this caption of a video. Reply with only the missing noun phrase.\n"
    "Caption: {masked_caption}\n"
    "Missing noun phrase:"
)
PROMPT_FIELD = "masked_caption"
BRACES = "write a literal brace as {{ or }}"


def check_template(template: str) -> str:
    """The template if it holds `{masked_caption}`, plain, and no other field; else a `ValueError` with the reason, to
    follow the template's name. A format spec or conversion (`{masked_caption:>99999999}`) would fail on a caption,
    change it, or pad it to any size."""
    try:
        parsed = [(field, spec, conversion) for _, field, spec, conversion in string.Formatter().parse(template)]
    except ValueError as error:
        raise ValueError(f"not a valid template ({error}); {BRACES}") from error
    fields = {field for field, _, _ in parsed if field is not None}
    if PROMPT_FIELD not in fields:
        raise ValueError(f"must contain {{{PROMPT_FIELD}}}, where each clip's masked caption goes")
    if fields != {PROMPT_FIELD}:
        others = ", ".join(sorted("{" + field + "}" for field in fields - {PROMPT_FIELD}))
        raise ValueError(f"may only use {{{PROMPT_FIELD}}}, got {others}; {BRACES}")
    for field, spec, conversion in parsed:
        if spec or conversion:
            written = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(f"{written[:100]} has a format spec or conversion; write {{{PROMPT_FIELD}}} alone")
    return template
