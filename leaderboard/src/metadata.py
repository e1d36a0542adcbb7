"""What a submission says of its system, each field checked the same way from the Submit tab, the command line and a
stored metadata.json (`Refused` names the first bad one), and system names compared as a reader sees them."""

import re
import unicodedata

from fiberbench.metric.evaluate.results import HUMAN_AGREEMENT, MOST_FREQUENT_ANSWER

from .display import PAPER_TABLE_3

MAX_NAME_CHARS, MAX_TEXT_CHARS = 80, 200
KINDS = ("fiber", "seq2seq", "causal", "video", "other")  # fiberbench predict's --model_type, or other
VIDEO_INPUTS = ("frames", "fps", "features", "none")  # a number of frames per clip, frames per second, ...
RUNS = ("fiberbench predict", "lmms-eval", "other")
# The fields a submission gives (the Submit tab's label, what to give, the choices), `--FIELD` on the command line.
FIELDS = {
    "system": ("system name", f"At most {MAX_NAME_CHARS} characters, one script, unlike any name on the board.", None),
    "link": ("link", "A link to the model, paper or code (https://...).", None),
    "kind": ("kind", "What kind of system it is (default: other).", KINDS),
    "parameters": ("parameters", "Its number of parameters, e.g. 7B or 220M.", None),
    "open_weights": ("open weights", "Whether its weights are published.", ("yes", "no")),
    "video_input": ("video input", "What it sees of a clip: frames (a number per clip), fps (frames per second), "
                    "features (e.g. I3D) or none.", VIDEO_INPUTS),
    "frames": ("frames per clip", "Frames per clip it reads (with fps: the most it reads).", None),
    "fps": ("frames per second", "Frames per second it reads (with video input fps).", None),
    "run_with": ("run with", "How its predictions were made (default: other).", RUNS),
    "task_version": ("task version", "With run with lmms-eval: the FIBER task's version.", None),
    "answer_reading": ("answer reading", "How the answer is read from its reply.", None),
}
# Letters (any script), digits, spaces and a few signs: no markup, no quotes, no $ (mathtext), no control characters.
SIGNS = ".,:;+-_()/#@%&=?!"
PLAIN_TEXT = re.compile(rf"[\w {re.escape(SIGNS)}]*")
LINK = re.compile(r"https://[A-Za-z0-9.\-]+(?:/[A-Za-z0-9._~/?#@!$&*+,;=%\-]*)?")
# Letters a reader does not see (the Hangul fillers): `\w` takes them, so "T5" and "T5" + U+3164 would be two names.
INVISIBLE = "\u115f\u1160\u3164\uffa0"
# Unicode TR39's confusables that matter here, as a small table rather than a dependency: the Cyrillic, Greek and
# Armenian letters that look like Latin ones (upper and lower case). Names mixing Latin with another script are refused
# (TR39's "highly restrictive" level: Latin goes only with Han, kana, Hangul), so a look-alike missing here can only
# make a whole name of one other script.
LOOK_ALIKES = str.maketrans(
    "АВЕКМНОРСТХУЅІЈԚԜҮӀаеорсухѕіјһԁԛԝӏүΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹοινρχϲϳγυαՕՏՍօսոհց",
    "ABEKMHOPCTXYSIJQWYIaeopcyxsijhdqwlyABEZHIKMNOPTYXCoivpxcjyuaOSUounhg",
)
EAST_ASIAN = {"LATIN", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO"}
# What the store adds to a submission's metadata: its files' names (no path), their sha256, the date.
STORED = {"predictions": r"predictions\.(jsonl|json|csv)", "sha256": "[0-9a-f]{64}", "date": r"\d{4}-\d\d-\d\d"}
CONTROL = {"control": r"control\.(jsonl|json|csv)", "control_sha256": "[0-9a-f]{64}"}  # with a blind control
RESERVED = (*PAPER_TABLE_3, MOST_FREQUENT_ANSWER, HUMAN_AGREEMENT)  # the baselines' and the paper's rows


class Refused(ValueError):
    """A submission that is not stored, with the one line that says why."""


def name_key(name: str) -> str:
    """What a reader sees of a name: NFKC (fullwidth and styled letters as plain ones), look-alikes as the Latin letters
    they imitate, case folded, white space as one space. Two names with one key are one name."""
    return " ".join(unicodedata.normalize("NFKC", name).translate(LOOK_ALIKES).casefold().split())


RESERVED_KEYS = {name_key(name) for name in RESERVED}
BASELINE_KEYS = (name_key(MOST_FREQUENT_ANSWER), name_key(HUMAN_AGREEMENT))  # shown with more after them


def plain(value, field: str, limit: int = MAX_TEXT_CHARS, required: bool = False) -> str | None:
    """A text field in NFKC, white space collapsed: letters, digits, spaces and `SIGNS`, at most `limit` characters,
    starting with a letter or a digit (a spreadsheet reads a cell starting with = + - @ as a formula)."""
    if value is not None and not isinstance(value, str):
        raise Refused(f"{field}: expected text, got {type(value).__name__}")
    text = " ".join(unicodedata.normalize("NFKC", value or "").split())
    if not text:
        if required:
            raise Refused(f"{field}: give one")
        return None
    if len(text) > limit:
        raise Refused(f"{field}: {len(text)} characters, at most {limit}")
    bad = next((char for char in text if char in INVISIBLE or not PLAIN_TEXT.fullmatch(char)), None)
    if bad is not None:
        raise Refused(f"{field}: {bad!r} (U+{ord(bad):04X}) is not allowed (letters, digits, spaces and {SIGNS} only)")
    if not text[0].isalnum():
        raise Refused(f"{field}: starts with {text[0]!r}; start with a letter or a digit")
    return text


def check_name(name, taken: set[str]) -> str:
    """A system name that no row of the board shows already (`taken`: their `name_key`s) nor reserves."""
    name = plain(name, "system name", MAX_NAME_CHARS, required=True)
    scripts = {unicodedata.name(char, "?").split()[0] for char in name if char.isalpha()}
    if len(scripts) > 1 and not scripts <= EAST_ASIAN:
        raise Refused(f"system name: mixes {' and '.join(sorted(scripts))} letters; write it in one script")
    key = name_key(name)
    if key in RESERVED_KEYS or "baseline" in key or key.startswith(BASELINE_KEYS):
        raise Refused(f"system name: {name!r} is, or looks like, a baseline's or a row of the paper's; choose another")
    if key in taken:
        raise Refused(f"system name: {name!r} is on the board already (or one that looks the same); choose another")
    return name


def _number(value, field: str, low: float, high: float, whole: bool = False, suffixes: dict | None = None):
    """A number from text or JSON, None when empty; `suffixes` read "7B" as 7e9."""
    if value in (None, ""):
        return None
    text = str(value).strip()
    scale = (suffixes or {}).get(text[-1:].upper(), 1)
    try:
        number = None if isinstance(value, bool) else float(text[:-1] if scale != 1 else text) * scale
    except ValueError:
        number = None
    if number is None or not low <= number <= high or whole and not number.is_integer():
        raise Refused(f"{field}: {str(value)[:40]!r} is not a{' whole' * whole} number from {low:,g} to {high:,.0f}")
    return int(number) if whole else number


def _choice(value, field: str, choices: tuple, default: str | None = None) -> str | None:
    if value in (None, ""):
        return default
    if not (isinstance(value, str) and value in choices):
        raise Refused(f"{field}: {str(value)[:40]!r} is not one of {', '.join(choices)}")
    return value


def check_metadata(fields: dict, taken: set[str] = frozenset()) -> dict:
    """A submission's metadata from what a person gave (the page's or the command line's texts, or a stored
    metadata.json's values), each field checked in the order shown."""
    link = fields.get("link") or ""
    if link and not (isinstance(link, str) and len(link) <= MAX_TEXT_CHARS and LINK.fullmatch(link)):
        raise Refused(f"link: {str(link)[:60]!r} is not an https:// address of at most {MAX_TEXT_CHARS} characters")
    metadata = {
        "system": check_name(fields.get("system"), taken),
        "link": link or None,
        "kind": _choice(fields.get("kind"), "kind", KINDS, "other"),
        "parameters": _number(fields.get("parameters"), "parameters", 1e3, 1e13, True, {"K": 1e3, "M": 1e6, "B": 1e9}),
        "open_weights": _choice(fields.get("open_weights"), "open weights", ("yes", "no")),
        "video_input": _choice(fields.get("video_input"), "video input", VIDEO_INPUTS),
        "frames": _number(fields.get("frames"), "frames per clip", 1, 10_000, whole=True),
        "fps": _number(fields.get("fps"), "frames per second", 0.01, 240),
        "run_with": _choice(fields.get("run_with"), "run with", RUNS, "other"),
        "task_version": plain(fields.get("task_version"), "task version", 20),
        "answer_reading": plain(fields.get("answer_reading"), "answer reading"),
        "verified": fields.get("verified") is True,
    }
    rule = metadata["video_input"]
    if (metadata["fps"] is None) != (rule != "fps"):
        raise Refused("frames per second: give it with video input 'fps', and only then")
    if metadata["frames"] is not None and rule not in ("frames", "fps"):
        raise Refused("frames per clip: give it with video input 'frames' (or 'fps', as the most it reads)")
    if metadata["task_version"] is not None and metadata["run_with"] != "lmms-eval":
        raise Refused("task version: the lmms-eval task's; give it with run with 'lmms-eval'")
    return metadata


def check_stored(metadata) -> dict:
    """A stored metadata.json checked again (the store may have been edited), with what the store adds (`STORED`,
    `CONTROL`): file names within the submission's folder (no path), their sha256, the date."""
    if not isinstance(metadata, dict):
        raise Refused(f"expected a JSON object, got {type(metadata).__name__}")
    checked = check_metadata(metadata)
    for field, pattern in {**STORED, **(CONTROL if "control" in metadata else {})}.items():
        if not (isinstance(metadata.get(field), str) and re.fullmatch(pattern, metadata[field])):
            raise Refused(f"field {field!r}: {str(metadata.get(field))[:60]!r} is not {pattern}")
        checked[field] = metadata[field]
    return checked
