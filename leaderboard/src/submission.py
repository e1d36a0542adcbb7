"""A submission to the board: its file read within stated bounds and scored by `fiberbench evaluate`'s code on the
server, in a process of its own, then stored in one commit.

Everything a person sends is checked before anything is stored, and a refusal is one line (`Refused`) naming the field,
the file and the record (`metadata` says what the fields may be). Each bound of the file is checked before the cost of
reading grows with it (`check_file`, one pass over the text); the file is read and scored in a child process
(`in_child`), so what reading it costs, the metric's caches included, goes with that process, and a crash ends it
alone. Two submissions at once are both kept (`commit`); a submitter may send a few a day (`DailyLimit`).
"""

import csv
import datetime
import hashlib
import json
import re
import threading
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import chain
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from fiberbench.errors import DataError, describe
from fiberbench.metric.evaluate.predictions import Split, System, join, read_rows, recorded_reading
from fiberbench.metric.evaluate.results import evaluate_systems, score_columns

from .metadata import FORMATS, Refused, check_metadata, check_name, name_key

METADATA_FILE, RESULTS_FILE = "metadata.json", "results.json"
MAX_FILE_BYTES = 20 * 2**20  # an lmms-eval samples file of 1,000 blanks is a few MB
MAX_LINE_CHARS, MAX_DEPTH, MAX_COLUMNS, MAX_ANSWER_CHARS = 2**16, 16, 32, 500
BOUNDS = (
    f"A predictions file of at most {MAX_FILE_BYTES // 2**20} MB ({', '.join(FORMATS)}; an lmms-eval samples file "
    f"too) with one prediction for every blank of the split: lines of at most {MAX_LINE_CHARS:,} characters (JSON "
    f"Lines, CSV), JSON nested at most {MAX_DEPTH} deep, at most {MAX_COLUMNS} CSV columns, answers (and candidates) "
    f"of at most {MAX_ANSWER_CHARS} characters."
)
FIBER_TASKS = ("fiber_test", "fiber_val")  # the lmms-eval task's names
# A JSON string, or the rest of the text where one is never closed: each character is looked at once.
_STRING = re.compile(r'"(?:[^"\\]|\\.?)*+(?:"|\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_CHILDREN = get_context("forkserver")
_CHILDREN.set_forkserver_preload(["fiberbench.metric.evaluate.results"])


class HeadMoved(Exception):
    """The store changed since the revision a submission was checked against: check again and retry."""


def in_child(function, *args):
    """`function(*args)` in a new process, which ends with it; its user errors come back as they were raised."""
    try:
        with ProcessPoolExecutor(1, mp_context=_CHILDREN) as pool:
            return pool.submit(function, *args).result()
    except BrokenProcessPool:
        raise DataError("the file could not be read: its reader ended abruptly") from None


def check_file(path: Path, shown: str) -> None:
    """`Refused` where the file is past a bound: its size, its format, a line's length, its JSON's depth, its CSV
    columns."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise Refused(f"{shown}: {size / 2**20:.1f} MB, more than the {MAX_FILE_BYTES // 2**20} MB a submission may be")
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise Refused(f"{shown}: a {suffix or 'file without a suffix'}; give {', '.join(FORMATS)}")
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    if suffix != ".json":
        lengths = [len(line) for line in text.split("\n")]
        if max(lengths) > MAX_LINE_CHARS:
            number = next(index for index, length in enumerate(lengths, 1) if length > MAX_LINE_CHARS)
            raise Refused(f"{shown}: line {number}: {lengths[number - 1]:,} characters, more than {MAX_LINE_CHARS:,}")
    if suffix == ".csv":
        header = next(csv.reader([text.split("\n", 1)[0]]), [])
        if len(header) > MAX_COLUMNS:
            raise Refused(f"{shown}: {len(header):,} columns in its header, more than {MAX_COLUMNS}")
        return
    brackets = np.frombuffer(_NOT_BRACKET.sub("", _STRING.sub("", text)).encode(), dtype=np.uint8)
    depth = np.cumsum(np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)).max(initial=0)
    if depth > MAX_DEPTH:
        raise Refused(f"{shown}: JSON nested {depth:,} deep, more than {MAX_DEPTH}")


def logged_task(rows: list) -> str | None:
    """The FIBER lmms-eval task's version where every row is a logged sample that carries the task (name and version)
    and the answer reader's settings, alike; None otherwise."""
    first = rows[0][1] if rows and isinstance(rows[0][1], dict) else {}
    task, reader = first.get("task"), first.get("reader")
    if not (isinstance(task, dict) and task.get("name") in FIBER_TASKS and isinstance(reader, dict)
            and isinstance(task.get("version"), str | int | float)):
        return None
    alike = all(isinstance(row, dict) and row.get("task") == task and row.get("reader") == reader for _, row in rows)
    return str(task["version"]) if alike else None


def score_file(split: Split, settings: dict, path: Path, name: str, shown: str, sha256: str | None = None):
    """evaluate's results for the file alone (system `name`), its per-blank scores and the lmms-eval task version its
    samples carry (or None); `Refused`, naming the file as `shown`, where it is past a bound, has changed since its
    `sha256` was recorded or does not join the split."""
    check_file(path, shown)
    if sha256 is not None and hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        raise Refused(f"{shown}: changed since it was scored (its sha256 is not the one metadata.json records)")
    try:
        rows = read_rows(path)
        system = System(name, shown, *join(path, rows, split), recorded_reading(path, rows))
    except DataError as error:  # it names the file by its path on the server; it may quote a long value: cut
        raise Refused(describe(error).replace(str(path), shown)) from None
    answers = chain(system.predictions, *(system.candidates or []))
    longest = max(map(len, answers), default=0)
    if longest > MAX_ANSWER_CHARS:
        raise Refused(f"{shown}: an answer of {longest:,} characters, more than {MAX_ANSWER_CHARS}")
    results = evaluate_systems([system], split, settings, with_baselines=False)
    return results, score_columns(system, split), logged_task(rows)


def score_files(split: Split, settings: dict, files: list[tuple[Path, str, str]]) -> list:
    """For each stored (predictions file, shown as, recorded sha256): evaluate's row for it and its per-blank scores,
    or the line that says why it cannot be scored."""
    outcomes = []
    for path, shown, sha256 in files:
        try:
            results, columns, _ = score_file(split, settings, path, shown, shown, sha256)
            outcomes.append((results["systems"][shown], columns))
        except Refused as refusal:
            outcomes.append(describe(refusal))
    return outcomes


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
        self.per_day, self.day, self.counts, self.lock = per_day, None, Counter(), threading.Lock()

    def take(self, submitter: str) -> None:
        with self.lock:
            if self.day != (today := datetime.datetime.now(datetime.timezone.utc).date()):
                self.day, self.counts = today, Counter()  # yesterday's counts go
            if self.counts[submitter] >= self.per_day:
                raise Refused(f"{self.per_day} submissions a day (UTC) at most from each submitter: submit again "
                              "tomorrow")
            self.counts[submitter] += 1
