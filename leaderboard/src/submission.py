"""A submission to the board: checked, scored by `fiberbench evaluate`'s code on the server, and stored in one commit.

Everything a person sends is checked before anything is stored, and a refusal is one line (`Refused`) naming the field,
the file and the record: texts are plain (no markup), the file at most `MAX_FILE_BYTES` in a format evaluate reads,
with one prediction for every blank of the split. Two submissions at once are both kept (see `submit`).
"""

import datetime
import hashlib
import json
import re
import uuid
from pathlib import Path

from fiberbench.errors import DataError
from fiberbench.metric.evaluate.predictions import FORMATS, Split
from fiberbench.metric.evaluate.results import evaluate_systems

from .populate import METADATA_FILE, RESULTS_FILE, HeadMoved, join_file, read_entries

MAX_FILE_BYTES = 20 * 2**20  # an lmms-eval samples file of 1,000 blanks is a few MB
MAX_NAME_CHARS, MAX_TEXT_CHARS, MAX_ATTEMPTS = 80, 200, 5
# Letters (any script), digits, spaces and a few signs: no markup, no quotes, no control characters.
PLAIN_TEXT = re.compile(r"[\w .,:;+\-_()/#@%&=?!]*")
LINK = re.compile(r"https://[A-Za-z0-9.\-]+(?:/[A-Za-z0-9._~/?#@!$&*+,;=%\-]*)?")
KINDS = ("seq2seq", "causal", "fiber", "video", "lmms-eval", "other")
BOUNDS = (
    f"A predictions file of at most {MAX_FILE_BYTES // 2**20} MB ({', '.join(FORMATS)}; an lmms-eval samples file "
    f"too) with one prediction for every blank of the split; a system name of at most {MAX_NAME_CHARS} characters "
    f"and texts of at most {MAX_TEXT_CHARS}, in letters, digits, spaces and .,:;+-_()/#@%&=?! only; a link starting "
    "with https://."
)


class Refused(ValueError):
    """A submission that is not stored, with the one line that says why."""


def _plain(value: str | None, field: str, limit: int, required: bool = False) -> str | None:
    text = " ".join((value or "").split())
    if required and not text:
        raise Refused(f"{field}: give one")
    if len(text) > limit:
        raise Refused(f"{field}: {len(text)} characters, at most {limit}")
    if not PLAIN_TEXT.fullmatch(text):
        bad = next(char for char in text if not PLAIN_TEXT.fullmatch(char))
        raise Refused(f"{field}: {bad!r} is not allowed (letters, digits, spaces and .,:;+-_()/#@%&=?! only)")
    return text or None


def check_metadata(system: str, link: str, kind: str, video_input: str, frames, answer_reading: str) -> dict:
    """The submission's metadata, each field checked (`Refused` names the first bad one)."""
    name = _plain(system, "system name", MAX_NAME_CHARS, required=True)
    link = (link or "").strip()
    if link and not (len(link) <= MAX_TEXT_CHARS and LINK.fullmatch(link)):
        raise Refused(f"link: {link[:60]!r} is not an https:// address of at most {MAX_TEXT_CHARS} characters")
    if kind not in KINDS:
        raise Refused(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    if frames not in (None, "") and (isinstance(frames, bool) or not float(frames).is_integer()
                                     or not 0 <= float(frames) <= 10_000):
        raise Refused(f"frames: {frames!r} is not a whole number of frames from 0 to 10,000")
    return {
        "system": name,
        "link": link or None,
        "kind": kind,
        "video_input": _plain(video_input, "video input", MAX_TEXT_CHARS),
        "frames": None if frames in (None, "") else int(float(frames)),
        "answer_reading": _plain(answer_reading, "answer reading", MAX_TEXT_CHARS),
    }


def _json_bytes(data) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def scored_submission(split: Split, settings: dict, path: Path, metadata: dict, shown: str) -> dict[str, bytes]:
    """The files of the submission's folder: the predictions as sent, evaluate's results.json, the metadata."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise Refused(f"{shown}: {size / 2**20:.1f} MB, more than the {MAX_FILE_BYTES // 2**20} MB a submission may be")
    if path.suffix.lower() not in FORMATS:
        raise Refused(f"{shown}: a {path.suffix or 'file without a suffix'}; give {', '.join(FORMATS)}")
    try:
        system = join_file(split, path, metadata["system"])
    except DataError as error:  # it names the uploaded file by its path on the server
        raise Refused(str(error).replace(str(path), shown)) from None
    content = path.read_bytes()
    predictions = f"predictions{path.suffix.lower()}"
    metadata = {
        **metadata,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "dataset": split.dataset,
        "file": shown,
        "sha256": hashlib.sha256(content).hexdigest(),
        "predictions": predictions,
    }
    results = evaluate_systems([system], split, settings, with_baselines=False)
    return {predictions: content, RESULTS_FILE: _json_bytes(results), METADATA_FILE: _json_bytes(metadata)}


def submit(split: Split, settings: dict, store, path: Path, metadata: dict, shown: str, parent: str | None = None):
    """Check, score and store one submission; the store's new head (`Refused` when it is not stored). `parent` is the
    revision the person saw (default: the head now); when the store moved past it, the name is checked again against
    the new head and the commit made there (`MAX_ATTEMPTS` times at most)."""
    files = scored_submission(split, settings, path, metadata, shown)
    submission_id = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S.%fZ}-{uuid.uuid4().hex[:8]}"
    for _ in range(MAX_ATTEMPTS):
        head = store.head(split.name) if parent is None else parent
        taken = {entry["system"] for entry, _ in read_entries(store.snapshot(split.name, head), split.name)}
        if metadata["system"] in taken:
            raise Refused(f"system name: {metadata['system']!r} is on the board already; choose another name")
        try:
            return store.add(split.name, submission_id, files, head, f"Add {metadata['system']} ({split.name})")
        except HeadMoved:
            parent = None  # checked again on the new head
    raise Refused(f"{store.describe()} kept changing during {MAX_ATTEMPTS} attempts: submit again")
