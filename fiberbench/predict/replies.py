"""The answer reader: the phrase a person would read as a chat model's answer to a FIBER blank.

Chat models (instruct LMs, video LLMs) rarely reply with the bare phrase: they rewrite the caption
with the blank filled, state the answer ("The missing noun phrase is ..."), quote or bold it, or
explain it. FIBER scores the answer, not the reply's form, so `fiberbench predict` (causal and
video-language models) and the FIBER lmms-eval task read every reply with `read_answer` here.

A reply is read by the first of `READINGS` that finds an answer in it, in this order:

1. `filled_caption`: the reply holds the caption's text before and after the blank (case and
   spacing aside, any final punctuation): the answer is what stands between them. A reply cut
   short by the token limit may end inside the text after the blank ("A boy talks about a camera
   in front of the"), and a blank at the start or end of the caption has text on one side only.
2. `statement`: a label and the answer: "The answer is X", "Missing noun phrase: X", "The blank
   should be filled with X" (the words answer, phrase, blank, word or guess, then "is", ":", "=",
   "should be", "would be", ... and X on the same line or the next).
3. `quoted`: the first phrase in quotes ("X", “X”, 'X', «X», `X`) or in bold or italics
   (**X**, __X__, *X*).
4. `refusal`: a first sentence that declines ("I'm sorry, ...", "I cannot ...", "As an AI ...")
   reads as no answer: the empty string.
5. `is_statement`: in the reply's first sentence, what follows "is", "are", "was", "were" or
   "'s" when it starts with an article, a determiner or a possessive ("The caption is a video",
   "It's a chef").
6. `first_sentence`: otherwise the reply's first non-empty line, up to the end of its first
   sentence (a period, "!" or "?" followed by a capital or the end), after an opening "Sure," or
   "Okay." and the like.

Statements (2 and 5) and filled captions end their answer at the end of its clause (a ",", ";"
or the end of the sentence), and an unclosed quote reads to there too. Every answer is then
cleaned: list markers ("- ", "1. "), quotes, bold and italics markers around it and its final
punctuation are removed, and white space is collapsed. An answer that holds the blank ("_____":
the caption repeated unfilled) is never taken; such a first sentence reads as no answer.

7. `noun_phrase` (optional: with a spaCy pipeline `nlp`): when the answer, put into the blank, is
   not a noun phrase by the paper's rule (`fiberbench.modeling.noun_phrases`, the rule
   `fill_blanks(only_noun_phrases=True)` uses), the answer becomes the first noun phrase in it
   (by spaCy's parse of the answer alone) that is one in the blank; phrases the caption already
   holds, then personal pronouns, are tried last. So "A man recorded a firefighter" for "A man
   records _____ with a phone." becomes "a firefighter". An answer with no such phrase stays.

Only the standard library is imported here; spaCy is loaded only for the noun-phrase step (by
`load_reader_pipeline`), so the lmms-eval task can import the reader at no cost. There, as in
`fiberbench predict`, with the same prompt (`prompts.DEFAULT_PROMPT`):

    from fiberbench.predict.replies import load_reader_pipeline, read_answer

    nlp = load_reader_pipeline()  # None, with a warning, where no English spaCy pipeline is installed

    def process_results(doc, results):
        answer = read_answer(results[0], doc["masked_caption"], nlp)
        ...

`reader_settings(nlp)` describes the reading for a results file's metadata.
"""

import logging
import re
import string
from collections.abc import Sequence

logger = logging.getLogger(__name__)

# The readings of a reply, in the order they are tried; the last step (`noun_phrase`) runs only with a pipeline.
READINGS = ("filled_caption", "statement", "quoted", "refusal", "is_statement", "first_sentence")
NOUN_PHRASE_STEP = "noun_phrase"

# The release writes a blank as five underscores; a reply that repeats it may write any number.
BLANK = re.compile(r"_{2,}")
QUOTES = "\"'`“”‘’«»„"
FINAL_PUNCTUATION = ".,;:!?"
# Markdown around an answer: bold, italics, code.
EMPHASIS = "*_`"

_SPACE = r"[^\S\n]"  # white space within a line
# The end of a clause: a comma or semicolon, the end of a sentence (see `_SENTENCE_END`), a line's end.
_CLAUSE_END = rf"(?={_SPACE}*(?:[,;!?]|\.+[\"'”’)*]*(?:{_SPACE}+[A-Z\"“‘(*]|{_SPACE}*$)|$))"
# The end of a sentence: "." (also "!" or "?") followed by a capital, a quote or the end of the line.
# "the U.S. flag" stays whole; "Mr. Smith" is cut after "Mr".
_SENTENCE_END = re.compile(rf"[.!?]+[\"'”’)*]*(?={_SPACE}+[A-Z\"“‘(*]|{_SPACE}*$)|[!?]", re.MULTILINE)

_STATEMENT = re.compile(
    r"\b(?:answer|phrase|blank|word|guess)s?\b"
    r"[^\n:.!?]{0,60}?"  # "... noun phrase in this caption is ..."
    r"(?:"
    rf"{_SPACE}*[:=]"
    rf"|{_SPACE}+(?:(?:should|would|could|can|must|might|will) be |is |are )?(?:filled|completed) (?:in )?with\b"
    rf"|{_SPACE}+(?:(?:should|would|could|can|must|might|will) be|is|are|was)\b(?:{_SPACE}*[:=\-–—])?"
    r")",
    re.IGNORECASE,
)
# A quoted, bold or italic phrase: the first of these (by where it starts) in the reply.
_QUOTED = re.compile(
    r"\"(?P<double>[^\"\n]+)\""
    r"|“(?P<curly>[^”\n]+)”"
    r"|«(?P<guillemets>[^»\n]+)»"
    r"|(?<!\w)'(?P<single>[^'\n]+)'(?!\w)"
    r"|‘(?P<curly_single>[^’\n]+)’"
    r"|`(?P<code>[^`\n]+)`"
    r"|\*\*(?P<bold>[^*\n]+)\*\*"
    r"|(?<![\w_])__(?P<bold_underscores>[^_\n]+)__(?![\w_])"
    r"|(?<![\w*])\*(?P<italics>[^*\n]+)\*(?![\w*])"
)
# An opening quote or marker -> its closing one.
_CLOSING = {'"': '"', "“": "”", "«": "»", "'": "'", "‘": "’", "`": "`", "**": "**", "__": "__", "*": "*"}
_DETERMINER = (
    r"(?:a|an|the|some|any|this|that|these|those|his|her|their|its|my|your|our|one|two|three|four|five|several|"
    r"many|someone|somebody|something|people)"
)
_IS_STATEMENT = re.compile(
    rf"(?:\b(?:is|are|was|were)|(?<=\w)['’]s){_SPACE}+(?={_DETERMINER}\b)", re.IGNORECASE
)
_OPENER = re.compile(
    rf"^{_SPACE}*(?:sure|okay|ok|certainly|of course|yes|well|alright|here you go|here it is)(?:[,.!:]+|{_SPACE}*$)\s*",
    re.IGNORECASE,
)
_REFUSAL = re.compile(
    r"^(?:i['’]?m sorry|sorry|i am sorry|i apologi[sz]e|unfortunately|as an ai\b|"
    r"i (?:cannot|can ?not|can['’]t|am unable|['’]m unable|am not able|do not|don['’]t|have no|could not|"
    r"couldn['’]t)\b|"
    r"there is no (?:video|caption|image|blank)\b|it is (?:not possible|impossible|unclear)\b)",
    re.IGNORECASE,
)
_LIST_MARKER = re.compile(rf"^{_SPACE}*(?:[-•]|\d+[.)]){_SPACE}+")


def read_answer(reply: str, masked_caption: str, nlp=None) -> str:
    """The phrase a person would read as the answer in `reply` to the blank of `masked_caption`.

    `nlp` is a spaCy pipeline for the noun-phrase step (`load_reader_pipeline` loads one), None to skip
    it. See the module's docstring for the order of the readings.

    >>> read_answer("A man records a firefighter with a phone.", "A man records _____ with a phone.")
    'a firefighter'
    >>> read_answer('The missing noun phrase is "someone', "Someone is looking at _____ for a while.")
    'someone'
    >>> read_answer("**A kite**\\nThe girl is flying it.", "_____ can be seen clearly in this video.")
    'A kite'
    """
    return read_answers([reply], [masked_caption], nlp)[0]


def read_answers(replies: Sequence[str], masked_captions: Sequence[str], nlp=None) -> list[str]:
    """`read_answer` of each (reply, masked caption) pair; the noun-phrase step parses them all in a few `nlp.pipe`s."""
    if len(replies) != len(masked_captions):
        raise ValueError(f"Got {len(replies)} replies but {len(masked_captions)} masked captions.")
    answers = [reading(reply, caption)[1] for reply, caption in zip(replies, masked_captions)]
    if nlp is not None:
        answers = noun_phrases_in_blanks(masked_captions, answers, nlp)
    return answers


def reading(reply: str, masked_caption: str) -> tuple[str, str]:
    """Which of `READINGS` read `reply`, and the answer it read (before the noun-phrase step)."""
    if len(BLANK.findall(masked_caption)) != 1:
        raise ValueError(f"A masked caption needs exactly one blank (_____), got: {masked_caption!r}")
    answer = _filled_caption(reply, masked_caption)
    if answer is not None:
        return "filled_caption", answer
    answer = _statement(reply)
    if answer is not None:
        return "statement", answer
    answer = _quoted(reply)
    if answer is not None:
        return "quoted", answer
    first = _first_sentence(reply)
    if _REFUSAL.match(first):
        return "refusal", ""
    answer = _is_statement(first)
    if answer is not None:
        return "is_statement", answer
    return "first_sentence", _usable(first) or ""


def reader_settings(nlp=None) -> dict:
    """How replies are read, for the predictions' metadata: the reader, its readings in order, the noun-phrase step."""
    spacy_model = None
    if nlp is not None:
        from fiberbench.modeling.noun_phrases import pipeline_name

        spacy_model = pipeline_name(nlp)
    return {
        "reader": f"{__name__}.read_answer",
        "readings": [*READINGS, *([NOUN_PHRASE_STEP] if nlp is not None else [])],
        "spacy_model": spacy_model,
    }


def load_reader_pipeline(spacy_model: str | None = None, required: bool = False):
    """The spaCy pipeline of the noun-phrase step: `spacy_model`, by default the paper's (or the largest English one
    installed, see `load_spacy_pipeline`).

    When none can be loaded, None (the step is skipped, with a warning) unless `required`, where
    the OSError or ImportError that names the install command is raised.
    """
    from fiberbench.modeling.noun_phrases import load_spacy_pipeline

    try:
        return load_spacy_pipeline(spacy_model)
    except (OSError, ImportError) as missing:
        if required:
            raise
        logger.warning("Replies are read without the noun-phrase step: %s", missing)
        return None


def _words(text: str) -> str:
    """A pattern of the words of `text`, separated by any white space within a line."""
    return rf"{_SPACE}+".join(re.escape(word) for word in text.split())


def _prefixes(words: list[str], minimum: int) -> str:
    """A pattern of the first `minimum` or more of `words`, in order: the text after a blank, cut short."""
    pattern = ""
    for index in range(len(words) - 1, -1, -1):
        joined = re.escape(words[index]) + (rf"(?:{_SPACE}+{pattern})?" if pattern else "")
        pattern = joined if index >= minimum - 1 else re.escape(words[index]) + rf"{_SPACE}+{pattern}"
    return pattern


def _filled_caption(reply: str, masked_caption: str) -> str | None:
    """What stands in the blank's place in a reply that rewrites the caption (see the module's docstring)."""
    before, after = BLANK.split(masked_caption)
    before_words, after_words = before.split(), after.strip().rstrip(FINAL_PUNCTUATION).split()
    if not before_words and not after_words:
        return None
    ends = [rf"{_SPACE}*{_words(after)}(?!\w)"] if after_words else []
    # A reply may also stop after the answer, or be cut by the token limit inside the text after the blank:
    # at least two words of it when nothing comes before the blank (a bare phrase is not a filled caption).
    minimum = 1 if before_words else 2
    if len(after_words) >= minimum:
        cut = rf"(?:{_SPACE}+{_prefixes(after_words, minimum)})" + ("?" if before_words else "")
        ends.append(cut + _CLAUSE_END)
    elif before_words:
        ends.append(_CLAUSE_END)
    if before_words:
        start, answer = rf"(?<!\w){_words(before)}{_SPACE}*", r"[^\n]+?"
    else:  # the answer starts the line, or follows its last colon, quote or bold marker
        start, answer = r"(?:^|(?<=[:\"“*]))", r"[^\n:\"“*]+?"
    pattern = re.compile(rf"{start}(?P<answer>{answer})(?:{'|'.join(ends)})", re.IGNORECASE | re.MULTILINE)
    for match in pattern.finditer(reply):
        answer = _usable(match.group("answer"))
        if answer is not None:
            return answer
    return None


def _statement(reply: str) -> str | None:
    """The answer after a label ("The answer is X", "Missing noun phrase: X"): the first label followed by one."""
    for match in _STATEMENT.finditer(reply):
        rest = reply[match.end() :]
        # The answer may stand on the next line ("Missing noun phrase:\na kite").
        rest = rest.lstrip(" \t")
        if rest.startswith("\n"):
            rest = rest[1:]
        answer = _usable(_up_to_clause_end(rest))
        if answer is not None:
            return answer
    return None


def _quoted(reply: str) -> str | None:
    """The first phrase in quotes, bold or italics that is not the blank."""
    for match in _QUOTED.finditer(reply):
        answer = _usable(next(group for group in match.groups() if group is not None))
        if answer is not None:
            return answer
    return None


def _first_sentence(reply: str) -> str:
    """The first sentence of the reply's first non-empty line, after an opening "Sure," and the like."""
    line = next((line for line in reply.splitlines() if line.strip()), "")
    opened = _OPENER.sub("", line, count=1)
    line = opened if opened.strip() else line
    end = _SENTENCE_END.search(line)
    return (line[: end.end()] if end else line).strip()


def _is_statement(sentence: str) -> str | None:
    """What follows "is" ("are", "'s", ...) in `sentence` when it starts with a determiner ("It is a chef")."""
    match = _IS_STATEMENT.search(sentence)
    return None if match is None else _usable(_up_to_clause_end(sentence[match.end() :]))


def _up_to_clause_end(text: str) -> str:
    """The start of `text` up to the end of its clause, or if it opens a quote, up to its closing quote (unclosed: to
    the end of the clause)."""
    for opening in sorted(_CLOSING, key=len, reverse=True):
        if text.startswith(opening):
            closing = text.find(_CLOSING[opening], len(opening))
            line_end = text.find("\n")
            if closing != -1 and (line_end == -1 or closing < line_end):
                return text[len(opening) : closing]
            break
    match = re.match(rf"[^\n]*?{_CLAUSE_END}", text, re.MULTILINE)
    return match.group(0) if match else text


def _usable(answer: str) -> str | None:
    """`answer` cleaned, or None when nothing is left or it holds the blank."""
    cleaned = _clean(answer)
    return cleaned if cleaned and not BLANK.search(cleaned) else None


def _clean(answer: str) -> str:
    """`answer` without a list marker, the quotes and markdown around it and its final punctuation; one space between
    words."""
    answer = _LIST_MARKER.sub("", answer, count=1)
    while True:
        stripped = answer.strip(QUOTES + EMPHASIS + string.whitespace)
        stripped = stripped.rstrip(QUOTES + EMPHASIS + FINAL_PUNCTUATION + string.whitespace)
        if stripped == answer:
            return " ".join(answer.split())
        answer = stripped


def _plain(text: str) -> str:
    """The words of `text`, lower-cased, one space apart, without punctuation."""
    return " ".join(re.findall(r"[\w']+", text.lower()))


def _in_caption(phrase: str, caption: str) -> bool:
    """Whether `phrase`, without its article, is words of `caption` (`_plain`, with a space at each end)."""
    words = _plain(phrase).split()
    if words and words[0] in ("a", "an", "the"):
        words = words[1:]
    return bool(words) and f" {' '.join(words)} " in caption


def noun_phrases_in_blanks(masked_captions: Sequence[str], answers: Sequence[str], nlp) -> list[str]:
    """Each answer, or the first noun phrase in it that is one in its blank (the `noun_phrase` step).

    Three `nlp.pipe` passes at most: the answers in their blanks; the rejected answers on their
    own (their phrases); those phrases in the blanks.
    """
    from fiberbench.modeling.noun_phrases import are_noun_phrases, is_noun_phrase_span, parse_texts

    fits = are_noun_phrases(masked_captions, answers, nlp)
    rejected = [index for index, (answer, fit) in enumerate(zip(answers, fits)) if answer and not fit]
    phrases = {}  # index of a rejected answer -> its noun phrases, in the order they are tried
    for index, doc in zip(rejected, parse_texts(nlp, (answers[index] for index in rejected))):
        # The phrases of the parse (each word's subtree) and its base noun phrases ("a chef" in "a chef because ...").
        spans = {(token.left_edge.i, token.right_edge.i + 1) for token in doc}
        spans |= {(chunk.start, chunk.end) for chunk in doc.noun_chunks}
        found = [doc[start:end] for start, end in spans if end - start < len(doc)]
        found = [span for span in found if is_noun_phrase_span(span)]
        # The first phrase (the longest of those starting there) first; after them the phrases the caption already
        # holds, article aside ("The man" of "The man recorded a phone" for "A man records _____."), then personal
        # pronouns ("he").
        caption = f" {_plain(masked_captions[index])} "
        found.sort(key=lambda span: (span.root.tag_ == "PRP", _in_caption(span.text, caption), span.start, -len(span)))
        phrases[index] = list(dict.fromkeys(span.text for span in found))
    tried = [(index, phrase) for index in rejected for phrase in phrases[index]]
    fit_in_blank = are_noun_phrases([masked_captions[index] for index, _ in tried], [p for _, p in tried], nlp)
    chosen = list(answers)
    for (index, phrase), fit in zip(reversed(tried), reversed(fit_in_blank)):
        if fit:  # walking backwards, the last phrase set is the first that fits
            chosen[index] = phrase
    return [_clean(answer) for answer in chosen]
