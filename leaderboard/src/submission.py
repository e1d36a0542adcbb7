"""A submission to the board: checked, scored by `fiberbench evaluate`'s code on the server, and stored in one commit.

Everything a person sends is checked before anything is stored, and a refusal is one line (`Refused`) naming the field,
the file and the record (`metadata` says what the fields may be, `scoring` what the file may be). Two submissions at
once are both kept (see `submit`); a submitter may send a few a day (`DailyLimit`).
"""

import datetime
import hashlib
import json
import threading
import uuid
from pathlib import Path

from fiberbench.metric.evaluate.predictions import Split

from .metadata import Refused, check_metadata, check_name, name_key
from .populate import METADATA_FILE, RESULTS_FILE, HeadMoved
from .scoring import in_child, score_file

MAX_ATTEMPTS = 5


def _json_bytes(data) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def _taken(store, split: Split, head: str) -> set[str]:
    return {name_key(entry.metadata["system"]) for entry in store.read(split.name, head)[0]}


def prepare(split: Split, settings: dict, store, path: Path, fields: dict, shown: str, head: str,
            taken: set[str] = frozenset()) -> tuple[dict, dict[str, bytes]]:
    """One submission checked against the store at `head` (and the names `taken` besides) and scored: its metadata
    and the files of its folder (`Refused` says why not). Logged samples of the FIBER lmms-eval task that carry its
    version and settings are marked verified."""
    metadata = check_metadata(fields, _taken(store, split, head) | taken)
    results, _, task_version = in_child(score_file, split, settings, path, metadata["system"], shown)
    if task_version is not None:
        metadata = check_metadata({**metadata, "run_with": "lmms-eval", "task_version": task_version, "verified": True})
    content = path.read_bytes()
    predictions = f"predictions{path.suffix.lower()}"
    metadata.update(date=datetime.datetime.now(datetime.timezone.utc).date().isoformat(), dataset=split.dataset,
                    file=shown, sha256=hashlib.sha256(content).hexdigest(), predictions=predictions)
    return metadata, {predictions: content, RESULTS_FILE: _json_bytes(results), METADATA_FILE: _json_bytes(metadata)}


def commit(store, split: Split, metadata: dict, files: dict[str, bytes], head: str) -> str:
    """Store a prepared submission on top of `head`; when the store moved past it, its name is checked again against
    the new head and the commit made there (`MAX_ATTEMPTS` times at most). The store's new head."""
    submission_id = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S.%fZ}-{uuid.uuid4().hex[:8]}"
    for _ in range(MAX_ATTEMPTS):
        try:
            return store.add(split.name, submission_id, files, head, f"Add {metadata['system']} ({split.name})")
        except HeadMoved:
            head = store.head(split.name)
            check_name(metadata["system"], _taken(store, split, head))
    raise Refused(f"{store.describe()} kept changing during {MAX_ATTEMPTS} attempts: submit again")


def submit(split: Split, settings: dict, store, path: Path, fields: dict, shown: str, parent: str | None = None) -> str:
    """Check, score and store one submission (`fields`: what `check_metadata` takes); the store's new head. `parent`
    is the revision the person saw (default: the head now)."""
    head = store.head(split.name) if parent is None else parent
    return commit(store, split, *prepare(split, settings, store, path, fields, shown, head), head)


class DailyLimit:
    """At most `per_day` submissions a day (UTC) from each submitter, counted in this process: two files that differ in
    one blank would otherwise tell that blank's answer, one query at a time."""

    def __init__(self, per_day: int):
        self.per_day, self.counts, self.lock = per_day, {}, threading.Lock()

    def take(self, submitter: str) -> None:
        today = datetime.datetime.now(datetime.timezone.utc).date()
        with self.lock:
            self.counts = {key: count for key, count in self.counts.items() if key[1] == today}
            count = self.counts.get((submitter, today), 0)
            if count >= self.per_day:
                raise Refused(f"{self.per_day} submissions a day (UTC) at most from each submitter: submit again "
                              "tomorrow")
            self.counts[submitter, today] = count + 1
