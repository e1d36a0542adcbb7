"""The answer reader: the phrase a person would read as a chat model's answer to a FIBER blank.

Chat models rarely reply with the bare phrase: they rewrite the caption with the blank filled, state the answer, quote
or bold it, or explain it. FIBER scores the answer, not the reply's form, so `fiberbench predict` and the FIBER
lmms-eval task read every reply with `read_answer`. First the reply loses what is not its answer: a reasoning model's
thoughts (`<think>...</think>`; the text before a lone `</think>`, opened by the prompt; an unterminated `<think>` and
all after it, so a reply cut inside its thought is no answer) and the fence lines of code blocks. Then the first of
`READINGS` that finds an answer reads it:

1. `filled_caption`: the reply holds the caption's text before and after the blank (case, spacing and final
   punctuation aside): the answer is what stands between them; a reply cut short by the token limit may end inside
   the text after the blank, and a blank at the caption's start or end has text on one side only.
2. `statement`: a label and the answer: "The answer is X", "Missing noun phrase: X", "The blank should be filled
   with X" (answer, phrase, blank, word or guess, then "is", ":", "=", "should be", ..., X on that line or the next).
3. `quoted`: the first phrase in quotes ("X", “X”, 'X', «X», `X`), bold or italics (**X**, __X__, *X*).
4. `refusal`: a first sentence that declines ("I'm sorry", "I cannot", "As an AI") reads as no answer: "".
5. `is_statement`: in the first sentence, what follows "is", "are", "was", "were" or "'s" when it starts with an
   article, a determiner or a possessive ("It's a chef").
6. `first_sentence`: else the first non-empty line up to the end of its first sentence, after "Sure," and the like.

Statements and filled captions end their answer at the end of its clause (a ",", ";" or the sentence's end), and an
unclosed quote reads to there. Every answer loses list markers, quotes, emphasis, emoji and final punctuation around
it, and its white space is collapsed; an answer that holds the blank ("_____") is never taken.

7. `noun_phrase` (with a spaCy pipeline `nlp`): when the answer, put into the blank, is not a noun phrase by the
   paper's rule (`fiberbench.modeling.noun_phrases`), it becomes the first noun phrase in it (by spaCy's parse of the
   answer alone) that is one in the blank; phrases the caption already holds, then personal pronouns, are tried last
   ("A man recorded a firefighter" for "A man records _____ with a phone." reads "a firefighter"). Only the first
   `NOUN_PHRASE_WORDS` words of a longer answer are looked at (each phrase is parsed in the blank).

Reading takes time linear in the reply's length (no pattern scans the same characters again from each position of a
run); a statement's answer is read within `STATEMENT_WINDOW` characters of its label. Only the standard library is
imported here, spaCy only for the noun-phrase step (`load_reader_pipeline`), so the lmms-eval task imports the reader
at no cost. `reader_settings(nlp)` describes the reading (`READER_VERSION`, the step, its pipeline) for a predictions
file's metadata and each lmms-eval sample (`fiberbench evaluate` says it in words). The same reply reads as the same
answer wherever the same reading runs (tests/predict's golden list, checked in every environment CI tests).
"""

import re
import string
import unicodedata
from collections.abc import Sequence

from fiberbench.errors import UsageError

# The version of the reading: raised whenever a reply may read as another answer (then the golden list of
# tests/predict is written again), so that predictions read by different readers are told apart.
# 2: thoughts, code fences and emoji removed; "The answer is _____" read as no answer; linear time.
READER_VERSION = 2
# The readings of a reply, in the order they are tried; the last step (`noun_phrase`) runs only with a pipeline.
READINGS = ("filled_caption", "statement", "quoted", "refusal", "is_statement", "first_sentence")
NOUN_PHRASE_STEP = "noun_phrase"

# The release writes a blank as five underscores; a reply that repeats it may write any number.
BLANK = re.compile(r"_{2,}")
QUOTES = "\"'`“”‘’«»„"
FINAL_PUNCTUATION = ".,;:!?"
EMPHASIS = "*_`"  # Markdown around an answer: bold, italics, code
# Reasoning models (Qwen3, DeepSeek-R1) think between these before they answer.
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# Phrases of a longer answer are looked for in its first words only (see the module's docstring).
NOUN_PHRASE_WORDS = 32
# Characters after a statement's label within which its answer is read (see the module's docstring).
STATEMENT_WINDOW = 1000

_SPACE = r"[^\S\n]"  # white space within a line
# Where an answer may end: not inside a run of spaces. The runs of spaces (and of dots, below) are then scanned once
# from their start, not again from each position in them, which took quadratic time (5,000 spaces: 1 s).
_AFTER_WORD = rf"(?<!{_SPACE})"
# The end of a clause: a comma or semicolon, the end of a sentence (see `_SENTENCE_END`), a line's end.
_CLAUSE_END = rf"{_AFTER_WORD}(?={_SPACE}*(?:[,;!?]|(?<!\.)\.+[\"'”’)*]*(?:{_SPACE}+[A-Z\"“‘(*]|{_SPACE}*$)|$))"
# The end of a sentence: "." (also "!" or "?") followed by a capital, a quote or the end of the line.
# "the U.S. flag" stays whole; "Mr. Smith" is cut after "Mr".
_SENTENCE_END = re.compile(rf"(?<![.!?])[.!?]+[\"'”’)*]*(?={_SPACE}+[A-Z\"“‘(*]|{_SPACE}*$)|[!?]", re.MULTILINE)

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
# A quoted, bold or italic phrase: the first of these (by where it starts) in the reply. A phrase in paired quotes
# holds no opening quote of its kind: each unclosed “ would otherwise be read to the line's end again.
_QUOTED = re.compile(
    r"\"(?P<double>[^\"\n]+)\""
    r"|“(?P<curly>[^“”\n]+)”"
    r"|«(?P<guillemets>[^«»\n]+)»"
    r"|(?<!\w)'(?P<single>[^'\n]+)'(?!\w)"
    r"|‘(?P<curly_single>[^‘’\n]+)’"
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
_IS_STATEMENT = re.compile(rf"(?:\b(?:is|are|was|were)|(?<=\w)['’]s){_SPACE}+(?={_DETERMINER}\b)", re.IGNORECASE)
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
# The opening or closing line of a Markdown code block, with its language if any ("```", "```text", "~~~").
_CODE_FENCE = re.compile(rf"^{_SPACE}*(?:`{{3,}}|~{{3,}})[\w+.-]*{_SPACE}*$\n?", re.MULTILINE)
_CLAUSE = re.compile(rf"[^\n]*?{_CLAUSE_END}", re.MULTILINE)
# Emoji and other pictographs around an answer; variation selectors and joiners hold emoji sequences together.
_SYMBOL_CATEGORIES = ("So", "Sk", "Cf", "Me")
_EMOJI_MODIFIERS = frozenset("\ufe0e\ufe0f\u200d")


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
    reply = _CODE_FENCE.sub("", _without_thoughts(reply))
    readers = {"filled_caption": lambda: _filled_caption(reply, masked_caption), "statement": lambda: _statement(reply),
               "quoted": lambda: _quoted(reply)}
    for name, read in readers.items():
        if (answer := read()) is not None:
            return name, answer
    first = _first_sentence(reply)
    if _REFUSAL.match(first):
        return "refusal", ""
    answer = _is_statement(first)
    if answer is not None:
        return "is_statement", answer
    return "first_sentence", _usable(first) or ""


def reader_settings(nlp=None) -> dict:
    """How replies are read, for the predictions' metadata and each lmms-eval sample: the reader and its version, its
    readings in order, whether the noun-phrase step ran and with which spaCy pipeline (name-version)."""
    readings = [*READINGS, *([NOUN_PHRASE_STEP] if nlp is not None else [])]
    return {"reader": f"{__name__}.read_answer", "version": READER_VERSION, "readings": readings,
            "noun_phrase_step": nlp is not None, "spacy_model": _pipeline_name(nlp) if nlp is not None else None}


def _pipeline_name(nlp) -> str:
    # Imported here: `fiberbench.modeling` loads torch, which the lmms-eval task's import of the reader does not need.
    from fiberbench.modeling.noun_phrases import pipeline_name

    return pipeline_name(nlp)


def load_reader_pipeline(spacy_model: str | None = None, opt_out: str = "pass --no_read_noun_phrases"):
    """The spaCy pipeline of the noun-phrase step: `spacy_model`, by default the paper's (or the largest English one
    installed, see `load_spacy_pipeline`).

    Replies are never read without the step silently (the same reply would read as another answer
    where spaCy or its pipeline is missing): when none can be loaded, a `UsageError` says how to
    install one, or `opt_out` (how the caller asks for the reading without the step).
    """
    from fiberbench.modeling.noun_phrases import load_spacy_pipeline  # see `_pipeline_name`

    try:
        return load_spacy_pipeline(spacy_model)
    except (OSError, ImportError) as missing:
        raise UsageError(
            f"the answer reader's noun-phrase step cannot run: {missing} Or, to read the replies without it (other "
            f"answers, recorded as such), {opt_out}"
        ) from missing


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


def _without_thoughts(reply: str) -> str:
    """`reply` without its thoughts: `<think>...</think>` blocks, the text before a lone `</think>` (the block was
    opened by the prompt), and an unterminated `<think>` with all that follows it."""
    position, kept = 0, []
    first_close = reply.find(THINK_CLOSE)
    if first_close != -1 and reply.find(THINK_OPEN, 0, first_close) == -1:
        position = first_close + len(THINK_CLOSE)
    while (start := reply.find(THINK_OPEN, position)) != -1:
        kept.append(reply[position:start])
        end = reply.find(THINK_CLOSE, start)
        if end == -1:
            return "".join(kept)
        position = end + len(THINK_CLOSE)
    kept.append(reply[position:])
    return "".join(kept)


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
    # The answer starts with a character that is not a space: after the spaces, not again at each of them.
    if before_words:
        start, answer = rf"(?<!\w){_words(before)}{_SPACE}*", r"[^\s][^\n]*?"
    else:  # the answer starts the line, or follows its last colon, quote or bold marker
        start, answer = rf"(?:^|(?<=[:\"“*])){_SPACE}*", r"[^\s:\"“*][^\n:\"“*]*?"
    pattern = re.compile(rf"{start}(?P<answer>{answer}){_AFTER_WORD}(?:{'|'.join(ends)})", re.IGNORECASE | re.MULTILINE)
    answers = (_usable(match.group("answer")) for match in pattern.finditer(reply))
    return next((answer for answer in answers if answer is not None), None)


def _statement(reply: str) -> str | None:
    """The answer after a label ("The answer is X", "Missing noun phrase: X"): the first label followed by one."""
    for match in _STATEMENT.finditer(reply):
        # The answer may stand on the next line ("Missing noun phrase:\na kite").
        rest = reply[match.end() : match.end() + STATEMENT_WINDOW].lstrip(" \t").removeprefix("\n")
        if (answer := _usable(_up_to_clause_end(rest))) is not None:
            return answer
    return None


def _quoted(reply: str) -> str | None:
    """The first phrase in quotes, bold or italics that is not the blank."""
    answers = (_usable(next(group for group in found.groups() if group)) for found in _QUOTED.finditer(reply))
    return next((answer for answer in answers if answer is not None), None)


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
    match = _CLAUSE.match(text)
    return match.group(0) if match else text


def _usable(answer: str) -> str | None:
    """`answer` cleaned, or None when nothing is left or it holds the blank (also where the blank ends it: cleaning
    would take its underscores for markdown)."""
    cleaned = _clean(answer)
    return cleaned if cleaned and not BLANK.search(cleaned) and "___" not in answer else None


def _is_symbol(character: str) -> bool:
    """Whether `character` is an emoji or another pictograph, or a part of an emoji sequence."""
    return character in _EMOJI_MODIFIERS or unicodedata.category(character) in _SYMBOL_CATEGORIES


def _without_symbols(text: str) -> str:
    """`text` without the emoji and pictographs at its start and end ("🎸 a guitar 🎸" -> " a guitar ")."""
    start, end = 0, len(text)
    while start < end and _is_symbol(text[start]):
        start += 1
    while end > start and _is_symbol(text[end - 1]):
        end -= 1
    return text[start:end]


def _clean(answer: str) -> str:
    """`answer` without a list marker, the quotes, markdown and emoji around it and its final punctuation; one space
    between words."""
    answer = _LIST_MARKER.sub("", answer, count=1)
    while True:
        stripped = _without_symbols(answer.strip(QUOTES + EMPHASIS + string.whitespace))
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

    # An answer longer than the window is not parsed whole (an empty answer is no noun phrase): only its first words.
    words = [answer.split() for answer in answers]
    whole = [answer if len(split) <= NOUN_PHRASE_WORDS else "" for answer, split in zip(answers, words)]
    fits = are_noun_phrases(masked_captions, whole, nlp)
    rejected = [index for index, (answer, fit) in enumerate(zip(answers, fits)) if answer and not fit]
    windows = (" ".join(words[index][:NOUN_PHRASE_WORDS]) for index in rejected)
    phrases = {}  # index of a rejected answer -> its noun phrases, in the order they are tried
    for index, doc in zip(rejected, parse_texts(nlp, windows)):
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
