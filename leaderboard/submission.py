"""A submission to the leaderboard: checked, scored by `fiberbench evaluate`'s code, and stored in one commit.

Everything a person sends is checked before anything is stored, and a refusal is one line
(`Refused`) that names the field, the file and the record: the name and the other texts must be
plain text (no HTML, no script), the file at most `MAX_FILE_BYTES` in a format `fiberbench evaluate`
reads, with one prediction for every blank of the board's split and no other. The split's answers
are read on the server only. Two submissions at once are both kept: each is committed on top of the
revision it was checked against, and one whose parent moved is checked again on the new head and
committed there (`MAX_ATTEMPTS` times at most).
"""

import datetime
import json
import re
import uuid
from pathlib import Path

from fiberbench.errors import DataError
from fiberbench.files import file_digest
from fiberbench.predictions import FORMATS

from fiberbench.leaderboard.board import Benchmark
from fiberbench.leaderboard.store import METADATA_FILE, RESULTS_FILE, HeadMoved, read_entries

MAX_FILE_BYTES = 20 * 2**20  # an lmms-eval samples file of 1,000 blanks is a few MB
MAX_NAME_CHARS = 80
MAX_TEXT_CHARS = 200
# Letters (any script), digits, spaces and a few signs: no markup, no quotes, no control characters.
PLAIN_TEXT = re.compile(r"[\w .,:;+\-_()/#@%&=?!]*")
LINK = re.compile(r"https://[A-Za-z0-9.\-]+(?:/[A-Za-z0-9._~/?#@!$&*+,;=%\-]*)?")
KINDS = ("seq2seq", "causal", "fiber", "video", "lmms-eval", "other")
MAX_ATTEMPTS = 5

BOUNDS = (
    f"A predictions file of at most {MAX_FILE_BYTES // 2**20} MB ({', '.join(FORMATS)}; an lmms-eval samples file "
    "too) with one prediction for every blank of the split; a system name of at most "
    f"{MAX_NAME_CHARS} characters and texts of at most {MAX_TEXT_CHARS}, in letters, digits, spaces and "
    ".,:;+-_()/#@%&=?! only; a link starting with https://."
)


class Refused(ValueError):
    """A submission that is not stored, with the one line that says why."""


def _plain(value: str | None, field: str, limit: int, required: bool = False) -> str:
    text = " ".join((value or "").split())
    if required and not text:
        raise Refused(f"{field}: give one")
    if len(text) > limit:
        raise Refused(f"{field}: {len(text)} characters, at most {limit}")
    if not PLAIN_TEXT.fullmatch(text):
        bad = next(char for char in text if not PLAIN_TEXT.fullmatch(char))
        raise Refused(f"{field}: {bad!r} is not allowed (letters, digits, spaces and .,:;+-_()/#@%&=?! only)")
    return text


def check_metadata(
    system: str, link: str, kind: str, video_input: str, frames, answer_reading: str
) -> dict:
    """The submission's metadata, each field checked (`Refused` names the first bad one)."""
    name = _plain(system, "system name", MAX_NAME_CHARS, required=True)
    link = (link or "").strip()
    if link and not (len(link) <= MAX_TEXT_CHARS and LINK.fullmatch(link)):
        raise Refused(f"link: {link[:60]!r} is not an https:// address of at most {MAX_TEXT_CHARS} characters")
    if kind not in KINDS:
        raise Refused(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    if frames in (None, ""):
        frames = None
    elif isinstance(frames, bool) or not float(frames).is_integer() or not 0 <= float(frames) <= 10_000:
        raise Refused(f"frames: {frames!r} is not a whole number of frames from 0 to 10,000")
    return {
        "system": name,
        "link": link or None,
        "kind": kind,
        "video_input": _plain(video_input, "video input", MAX_TEXT_CHARS) or None,
        "frames": None if frames is None else int(float(frames)),
        "answer_reading": _plain(answer_reading, "answer reading", MAX_TEXT_CHARS) or None,
    }


def check_file(path: Path, shown: str) -> None:
    """Refuse a file too large or of a format that `fiberbench evaluate` does not read, before reading it."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise Refused(f"{shown}: {size / 2**20:.1f} MB, more than the {MAX_FILE_BYTES // 2**20} MB a submission may be")
    if path.suffix.lower() not in FORMATS:
        raise Refused(f"{shown}: a {path.suffix or 'file without a suffix'}; give {', '.join(FORMATS)}")


def _json_bytes(data) -> bytes:
    """`data` as `fiberbench.files.write_json` writes it."""
    return (json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def scored_submission(benchmark: Benchmark, path: Path, metadata: dict, shown: str) -> dict[str, bytes]:
    """The files of the submission's folder: the predictions as sent, evaluate's results.json, the metadata."""
    check_file(path, shown)
    try:
        system = benchmark.join(path, metadata["system"])
    except DataError as error:  # it names the uploaded file by its path on the server
        raise Refused(str(error).replace(str(path), shown)) from None
    results = benchmark.results([system], with_baselines=False)
    predictions = f"predictions{path.suffix.lower()}"
    metadata = {
        **metadata,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "dataset": benchmark.dataset,
        "file": shown,
        "sha256": file_digest(path),
        "predictions": predictions,
    }
    return {
        predictions: path.read_bytes(),
        RESULTS_FILE: _json_bytes(results),
        METADATA_FILE: _json_bytes(metadata),
    }


def submit(benchmark: Benchmark, store, path: Path, metadata: dict, shown: str, parent: str | None = None) -> str:
    """Check, score and store one submission; the store's new head. `Refused` when it is not stored.

    `parent` is the revision the person saw the board at (default: the store's head now); when the
    store moved past it, the name is checked again against the new head and the commit made there.
    """
    split = benchmark.dataset["split"]
    files = scored_submission(benchmark, path, metadata, shown)
    submission_id = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S.%fZ}-{uuid.uuid4().hex[:8]}"
    for _ in range(MAX_ATTEMPTS):
        head = store.head(split) if parent is None else parent
        taken = {entry.metadata["system"] for entry in read_entries(store.snapshot(split, head), split)}
        if metadata["system"] in taken:
            raise Refused(f"system name: {metadata['system']!r} is on the board already; choose another name")
        try:
            return store.add(split, submission_id, files, head, f"Add {metadata['system']} ({split})")
        except HeadMoved:
            parent = None  # checked again on the new head
    raise Refused(f"{store.describe()} kept changing during {MAX_ATTEMPTS} attempts: submit again")
