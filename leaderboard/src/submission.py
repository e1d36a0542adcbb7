"""A submission: its files checked, read by `fiberbench evaluate`'s bounded reader and scored in a process of its own
(`in_child`: what reading costs goes with it), then stored in one commit; a refusal is one line (`Refused`)."""

import datetime
import hashlib
import json
import threading
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import chain
from multiprocessing import get_context
from pathlib import Path

from fiberbench.errors import DataError, describe
from fiberbench.metric.evaluate.predictions import (FORMATS, MAX_COLUMNS, MAX_DEPTH, MAX_LINE_CHARS, Split, System,
                                                    join, read_rows, recorded_reading)
from fiberbench.metric.evaluate.results import COMPARED, answered, evaluate_systems, score_columns

from .metadata import Refused, check_metadata, check_name, name_key

METADATA_FILE, RESULTS_FILE, MAX_ATTEMPTS = "metadata.json", "results.json", 5
MAX_FILE_BYTES, MAX_ANSWER_CHARS = 20 * 2**20, 500  # an lmms-eval samples file of 1,000 blanks is a few MB
BOUNDS = (
    f"A predictions file of at most {MAX_FILE_BYTES // 2**20} MB ({', '.join(FORMATS)}; an lmms-eval samples file "
    f"too) with one prediction for every blank of the split, read as `fiberbench evaluate` reads it: lines of at most "
    f"{MAX_LINE_CHARS:,} characters, JSON nested at most {MAX_DEPTH} deep, at most {MAX_COLUMNS} CSV columns; answers "
    f"(and candidates) of at most {MAX_ANSWER_CHARS} characters. Its blind control, optional, is a file of the same "
    "kind: the same system run without the video (`fiberbench predict --video_input none`)."
)
FIBER_TASKS = ("fiber_test", "fiber_val")  # the lmms-eval task's names
_CHILDREN = get_context("forkserver")
_CHILDREN.set_forkserver_preload(["fiberbench.metric.evaluate.results"])


class HeadMoved(Exception):
    """The store changed since the revision a submission was checked against: check again and retry."""


def in_child(function, *args):
    """`function(*args)` in a new process, which ends with it (and its memory); its errors come back as raised."""
    try:
        with ProcessPoolExecutor(1, mp_context=_CHILDREN) as pool:
            return pool.submit(function, *args).result()
    except BrokenProcessPool:
        raise DataError("the file could not be read: its reader ended abruptly") from None


def logged_task(rows: list) -> str | None:
    """The FIBER lmms-eval task's version where every row is a logged sample carrying the same task (name, version)
    and reader settings; None otherwise."""
    first = rows[0][1] if rows and isinstance(rows[0][1], dict) else {}
    task, reader = first.get("task"), first.get("reader")
    if not (isinstance(task, dict) and task.get("name") in FIBER_TASKS and isinstance(reader, dict)
            and isinstance(task.get("version"), str | int | float)):
        return None
    alike = all(isinstance(row, dict) and row.get("task") == task and row.get("reader") == reader for _, row in rows)
    return str(task["version"]) if alike else None


def read_file(split: Split, path: Path, name: str, shown: str, sha256: str | None = None) -> tuple[System, list]:
    """The file joined to the split as system `name`, and its rows; `Refused` (naming it `shown`) past a bound, where
    it changed since its `sha256` was recorded or does not join the split."""
    if (size := path.stat().st_size) > MAX_FILE_BYTES:
        raise Refused(f"{shown}: {size / 2**20:.1f} MB, more than the {MAX_FILE_BYTES // 2**20} MB a submission may be")
    if sha256 is not None and hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        raise Refused(f"{shown}: changed since it was scored (its sha256 is not the one metadata.json records)")
    try:
        rows = read_rows(path)
        system = System(name, shown, *join(path, rows, split), recorded_reading(path, rows))
    except DataError as error:  # it names the file by its path on the server; it may quote a long value: cut
        raise Refused(describe(error).replace(str(path), shown)) from None
    longest = max(map(len, chain(system.predictions, *(system.candidates or []))), default=0)
    if longest > MAX_ANSWER_CHARS:
        raise Refused(f"{shown}: an answer of {longest:,} characters, more than {MAX_ANSWER_CHARS}")
    return system, rows


def score_file(split: Split, settings: dict, path: Path, name: str, shown: str, sha256: str | None = None,
               control: tuple | None = None):
    """evaluate's results for the file alone (with the release's F1 and, given its blind `control` (path, shown,
    sha256), the gain from the video), its per-blank scores, the blanks it answered and its logged task version."""
    system, rows = read_file(split, path, name, shown, sha256)
    controls = None if control is None else {name: read_file(split, control[0], f"{name} without the video",
                                                             *control[1:])[0]}
    results = evaluate_systems([system], split, settings, False, controls, release_f1=True)
    columns = score_columns(system, split)
    return results, {metric: columns[metric] for metric in COMPARED}, answered(system, split), logged_task(rows)


def score_files(split: Split, settings: dict, files: list[tuple]) -> list:
    """For each stored (file, shown as, sha256, control or None): evaluate's row, per-blank scores and blanks
    answered, or the line that says why it cannot be scored."""
    outcomes = []
    for path, shown, sha256, control in files:
        try:
            results, *scores, _ = score_file(split, settings, path, shown, shown, sha256, control)
            outcomes.append((results["systems"][shown], *scores))
        except Refused as refusal:
            outcomes.append(describe(refusal))
    return outcomes


def _json_bytes(data) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def _taken(store, split: Split, head: str) -> set[str]:
    return {name_key(entry.metadata["system"]) for entry in store.read(split.name, head)[0]}


def prepare(split: Split, settings: dict, store, path: Path, fields: dict, shown: str, head: str,
            taken: set[str] = frozenset(), control: tuple[Path, str] | None = None) -> tuple[dict, dict[str, bytes]]:
    """One submission (and its blind `control`, (file, shown as)) checked against the store at `head` and the names
    `taken`, and scored: its metadata and its folder's files. Logged samples of the FIBER task are marked verified."""
    metadata = check_metadata(fields, _taken(store, split, head) | taken)
    results, *_, task_version = in_child(score_file, split, settings, path, metadata["system"], shown, None,
                                         control and (*control, None))
    if task_version is not None:
        metadata = check_metadata({**metadata, "run_with": "lmms-eval", "task_version": task_version, "verified": True})
    metadata.update(date=datetime.datetime.now(datetime.timezone.utc).date().isoformat(), dataset=split.dataset,
                    file=shown)
    files = {}
    kept = [("predictions", path, "sha256"), *([("control", control[0], "control_sha256")] if control else [])]
    for kind, file, digest in kept:
        stored = f"{kind}{file.suffix.lower()}"
        files[stored] = file.read_bytes()
        metadata.update({kind: stored, digest: hashlib.sha256(files[stored]).hexdigest()})
    return metadata, {**files, RESULTS_FILE: _json_bytes(results), METADATA_FILE: _json_bytes(metadata)}


def commit(store, split: Split, metadata: dict, files: dict[str, bytes], head: str) -> str:
    """Store a prepared submission on top of `head` or, where the store moved past it, on the new head after checking
    its name again (`MAX_ATTEMPTS` times at most): the store's new head."""
    submission_id = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S.%fZ}-{uuid.uuid4().hex[:8]}"
    for _ in range(MAX_ATTEMPTS):
        try:
            return store.add(split.name, submission_id, files, head, f"Add {metadata['system']} ({split.name})")
        except HeadMoved:
            head = store.head(split.name)
            check_name(metadata["system"], _taken(store, split, head))
    raise Refused(f"{store.describe()} kept changing during {MAX_ATTEMPTS} attempts: submit again")


def submit(split: Split, settings: dict, store, path: Path, fields: dict, shown: str, parent: str | None = None,
           control: tuple[Path, str] | None = None) -> str:
    """Check, score and store one submission on top of `parent`, the revision the person saw (default: the head)."""
    head = store.head(split.name) if parent is None else parent
    return commit(store, split, *prepare(split, settings, store, path, fields, shown, head, control=control), head)


class DailyLimit:
    """At most `per_day` submissions a day (UTC) from each submitter: two files that differ in one blank would
    otherwise tell that blank's answer."""

    def __init__(self, per_day: int):
        self.per_day, self.day, self.counts, self.lock = per_day, None, Counter(), threading.Lock()

    def take(self, submitter: str) -> None:
        with self.lock:
            if self.day != (today := datetime.datetime.now(datetime.timezone.utc).date()):
                self.day, self.counts = today, Counter()  # yesterday's counts go
            if self.counts[submitter] >= self.per_day:
                raise Refused(f"{self.per_day} submissions a day (UTC) at most from each submitter: submit again "
                              "tomorrow")
            self.counts[submitter] += 1
