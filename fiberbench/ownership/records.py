"""An output's record: which command's run wrote it, its state, and the files it lists (see `fiberbench.ownership`).

The record is `X.metadata.json` beside a file `X.ext`, `fiberbench_output.json` inside a folder.
A folder's record lists its entries, each folder entry with its files: replacing an earlier run
removes those files (`remove_entries`) and nothing else. `differences` says how the settings a
record keeps differ from a run's own.
"""

import contextlib
import datetime
import json
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError
from ..files import remove_stale_staging

FOLDER_RECORD = "fiberbench_output.json"
RECORD_SUFFIX = ".metadata.json"
RUNNING, COMPLETE = "running", "complete"
# The record's own fields; anything else in it is a section of the command's (e.g. predict's "settings").
RECORD_FIELDS = ("written_by", "state", "fiberbench_version", "host", "pid", "started", "finished", "entries")


def record_path(path: Path, folder: bool) -> Path:
    """Where the record of output `path` is: inside a folder, beside a file (`preds.jsonl` -> `preds.metadata.json`)."""
    return path / FOLDER_RECORD if folder else path.with_name(f"{path.stem}{RECORD_SUFFIX}")


def now() -> str:
    """The time records and lock files name: UTC, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass
class OutputRecord:
    """What an output's record says (see the module docstring)."""

    written_by: str
    state: str = RUNNING
    entries: dict[str, list[str] | None] = field(default_factory=dict)
    sections: dict = field(default_factory=dict)
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    started: str = field(default_factory=now)
    finished: str | None = None

    def to_json(self) -> dict:
        from .. import __version__

        return {
            "written_by": self.written_by,
            "state": self.state,
            "fiberbench_version": __version__,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "finished": self.finished,
            "entries": self.entries,
            **self.sections,
        }

    @classmethod
    def read(cls, path: Path) -> "OutputRecord | None":
        """The record in file `path`, or None when the file is not a fiberbench record at all (or is missing)."""
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return None
        if not isinstance(content, dict) or not isinstance(content.get("written_by"), str):
            return None
        entries = content.get("entries")
        if not isinstance(entries, dict) or not all(
            files is None or (isinstance(files, list) and all(isinstance(name, str) for name in files))
            for files in entries.values()
        ):
            raise DataError(f"{path}: field 'entries' must map entry names to lists of file names (or null)")
        pid = content.get("pid")
        return cls(
            written_by=content["written_by"],
            state=content.get("state") if content.get("state") in (RUNNING, COMPLETE) else RUNNING,
            entries=entries,
            sections={key: value for key, value in content.items() if key not in RECORD_FIELDS},
            host=str(content.get("host")),
            pid=pid if type(pid) is int else -1,
            started=str(content.get("started")),
            finished=content.get("finished") if isinstance(content.get("finished"), str) else None,
        )


def differences(ours: dict, theirs: dict, order: tuple[str, ...] = (), prefix: str = "") -> list[str]:
    """What changed between the settings of this run and an earlier one's, as 'decoding.num_beams: 4 here, 8 there'.

    Nested settings are compared key by key; the top-level sections named in `order` come first
    (those that change the outputs most), the others alphabetically after them.
    """
    found = []
    names = sorted(set(ours) | set(theirs))
    if not prefix:  # a stable sort: the sections of `order` first
        names.sort(key=lambda name: order.index(name) if name in order else len(order))
    for name in names:
        mine, other = ours.get(name), theirs.get(name)
        if isinstance(mine, dict) and isinstance(other, dict):
            found += differences(mine, other, prefix=f"{prefix}{name}.")
        elif mine != other:
            here, there = _shown(mine, other)
            found.append(f"{prefix}{name}: {here} here, {there} there")
    return found


SHOWN_LENGTH = 60


def _shown(mine, other) -> tuple[str, str]:
    """Two differing values as JSON, each at most about `SHOWN_LENGTH` characters: long ones are cut around where
    they first differ, so that the two sides never read the same."""
    texts = [json.dumps(value, default=str) for value in (mine, other)]
    if max(map(len, texts)) <= SHOWN_LENGTH:
        return texts[0], texts[1]
    first = next((i for i, (a, b) in enumerate(zip(*texts)) if a != b), min(map(len, texts)))
    start = max(0, first - SHOWN_LENGTH // 3)
    return tuple(
        ("..." if start else "") + text[start : start + SHOWN_LENGTH] + ("..." if start + SHOWN_LENGTH < len(text) else "")
        for text in texts
    )


def names_pattern(*names: str | re.Pattern) -> re.Pattern:
    """The pattern whose full matches are `names`: each a file or folder name as it is spelt, or a pattern of names.

    An output folder's entries (`Output`'s `entry_names`) are declared so, e.g.
    `names_pattern(RESULTS_FILE, re.compile(r"step_\\d+"))`.
    """
    return re.compile("|".join(name.pattern if isinstance(name, re.Pattern) else re.escape(name) for name in names))


def listing(folder: Path) -> dict[str, list[str] | None]:
    """A folder's entries as a record lists them: a file -> None, a folder -> the files in it."""
    entries = {}
    for entry in sorted(folder.iterdir()):
        if entry.name == FOLDER_RECORD:
            continue
        entries[entry.name] = files_in(entry) if entry.is_dir() and not entry.is_symlink() else None
    return entries


def files_in(folder: Path) -> list[str]:
    """Every file under `folder` (links included, never followed), as paths relative to it."""
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_symlink() or not path.is_dir())


def is_relative_file(file: str) -> bool:
    """A record's file name that stays inside its entry: relative, with no `..`."""
    return not Path(file).is_absolute() and ".." not in Path(file).parts and file not in ("", ".")


def unlisted_files(entry: Path, files: list[str] | None) -> list[str]:
    """The files of folder `entry` that `files` does not list (None: not listed yet, trusted), as 'entry/file'."""
    if files is None or not entry.is_dir() or entry.is_symlink():
        return []
    listed = set(files)
    return [f"{entry.name}/{relative}" for relative in files_in(entry) if relative not in listed]


def remove_entries(folder: Path, entries: dict[str, list[str] | None]) -> list[str]:
    """Remove the files an earlier run wrote in `folder`, as its record lists them (`entries`); returns the files
    left in its folder entries that it did not list (a user's), as 'entry/file'.

    A folder entry loses only its listed files, then the subfolders left empty; it goes only when
    nothing else is in it. A folder entry listed with no files (None: a killed run's record)
    loses nothing. A link is removed, never followed.
    """
    kept = []
    for name, files in entries.items():
        entry = folder / name
        remove_stale_staging(entry)
        if not entry.is_dir() or entry.is_symlink():
            entry.unlink(missing_ok=True)
            continue
        real = entry.resolve()
        for relative in files or ():
            file = entry / relative
            if is_relative_file(relative) and file.parent.resolve().is_relative_to(real) and not file.is_dir():
                file.unlink(missing_ok=True)
        for subfolder in sorted((path for path in entry.rglob("*") if path.is_dir() and not path.is_symlink()), reverse=True):
            with contextlib.suppress(OSError):  # not empty: a user's files are in it
                subfolder.rmdir()
        left = files_in(entry)
        if left:
            kept += [f"{name}/{relative}" for relative in left]
        else:
            entry.rmdir()
    return kept
