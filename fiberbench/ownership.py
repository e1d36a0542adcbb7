"""One owner for every output: which command's run wrote it, whether that run finished, and who writes it now.

Every command that writes (build-dataset, blank, answers, agreement, stats, hit-inputs, evaluate,
predict, train.py) declares each of its outputs as an `Output` and goes through it:

- `Output.check`, before any work: never the current directory, the home directory, the root or a
  folder above one of them; never an input, a folder above an input or a path inside an input
  folder; never a symbolic link. An existing output is replaced only with the command's overwrite
  flag, and only when this command wrote it (its record says so) and nothing else has been put
  there; what the command did not write is never replaced or deleted, flag or no flag.
- `Output.lock`, for the run's whole duration: `.NAME.lock` beside the output names the host and
  PID of the run that holds it. It is an advisory `flock`, which the kernel releases when its
  process ends however it ends, so the lock file of a killed run is taken over by the next run; a
  second run into the same output while the first goes on is refused in one line naming the first.
- The record, `OutputRecord`: `X.metadata.json` beside a file `X.ext`, `fiberbench_output.json`
  inside a folder. It names the command that wrote the output, the package version, host, PID and
  times, the entries a folder's run wrote, the command's own sections (e.g. predict's settings) and
  the state: `running` from the moment a run starts writing, `complete` once it is done. A killed
  run leaves `running`: its output says that it is unfinished.

Files and folders themselves are written atomically through `fiberbench.files`.
"""

import contextlib
import datetime
import errno
import fcntl
import json
import os
import re
import shutil
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import DataError, UsageError
from .files import atomic_folder, check_outputs_apart, write_json

FOLDER_RECORD = "fiberbench_output.json"
RECORD_SUFFIX = ".metadata.json"
RUNNING, COMPLETE = "running", "complete"
# The record's own fields; anything else in it is a section of the command's (e.g. predict's "settings").
RECORD_FIELDS = ("written_by", "state", "fiberbench_version", "host", "pid", "started", "finished", "entries")


def record_path(path: Path, folder: bool) -> Path:
    """Where the record of output `path` is: inside a folder, beside a file (`preds.jsonl` -> `preds.metadata.json`)."""
    return path / FOLDER_RECORD if folder else path.with_name(f"{path.stem}{RECORD_SUFFIX}")


def _now() -> str:
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
    started: str = field(default_factory=_now)
    finished: str | None = None

    def to_json(self) -> dict:
        from . import __version__

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


def check_not_protected(flag: str, path: Path) -> None:
    """Refuse an output that is (or is above) the current directory, the home directory, or the root."""
    resolved = path.expanduser().resolve()
    places = (("the current directory", Path.cwd().resolve()), ("the home directory", Path.home().resolve()))
    for name, place in places:
        if resolved == place or resolved in place.parents:
            raise UsageError(f"{flag} {path} is {name} or a folder above it: choose a new folder")
    if resolved == Path(resolved.anchor):
        raise UsageError(f"{flag} {path} is the root folder: choose a new folder")


class OutputLockedError(UsageError):
    """Another run holds the output's lock."""


class OutputLock:
    """The exclusive lock of one output, held by one run: `.NAME.lock` beside it, naming host, PID and command."""

    def __init__(self, path: Path, command: str, flag: str):
        path = Path(path).absolute()
        self.path = path.with_name(f".{path.name}.lock")
        self.output = path
        self.command = command
        self.flag = flag
        self._descriptor: int | None = None
        self._created: Path | None = None  # the first folder the lock had to create, removed again if left empty

    def acquire(self) -> None:
        """Take the lock, or raise `OutputLockedError` naming the run that holds it."""
        missing = [folder for folder in (self.path.parent, *self.path.parent.parents) if not folder.exists()]
        self._created = missing[-1] if missing else None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(descriptor)
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise OutputLockedError(
                    f"{self.flag} {self.output} is being written by another run ({self._holder()}, lock "
                    f"{self.path.name}); wait for it to end or choose another output"
                ) from None
            # The holder may have removed the lock file between our open and our flock: lock the file
            # that is at the path now, not an unlinked one.
            try:
                same = os.stat(self.path).st_ino == os.fstat(descriptor).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(descriptor)
        holder = {"command": self.command, "host": socket.gethostname(), "pid": os.getpid(), "started": _now()}
        os.ftruncate(descriptor, 0)
        os.write(descriptor, (json.dumps(holder) + "\n").encode())
        self._descriptor = descriptor

    def _holder(self) -> str:
        try:
            holder = json.loads(self.path.read_text(encoding="utf-8"))
            return f"{holder['command']}, PID {holder['pid']} on {holder['host']}, since {holder['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "a process that has not said which yet"

    def release(self) -> None:
        """Remove the lock file, and the folders the lock created if the run wrote nothing in them."""
        if self._descriptor is not None:
            self.path.unlink(missing_ok=True)
            os.close(self._descriptor)
            self._descriptor = None
            folder = self.path.parent
            while self._created is not None and folder != self._created.parent:
                with contextlib.suppress(OSError):  # not empty: the run wrote there
                    folder.rmdir()
                folder = folder.parent

    def __enter__(self) -> "OutputLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Output:
    """One output (a file, or a folder with `folder=True`) of one run of `command`.

    Args:
        path: where it is written.
        command: the command, as records name it: "fiberbench evaluate", "training/train.py".
        flag: the flag that names it, for messages ("--output_dir").
        overwrite: the command's overwrite flag was given.
        overwrite_flag: that flag's name, for messages.
        folder: the output is a folder (else a file).
        entry_names: a folder's entries this command writes (a pattern of names): an entry of
            another name is never replaced, and a record listing one was edited or damaged.
        resume_hint: how to continue the earlier output found there instead of replacing it, for the
            refusal ("--resume_from_checkpoint DIR/step_40 to continue it"); None when it cannot be.
        leaves_others: the command writes a folder entry by entry and never replaces it whole, so
            a user's entries of names it never writes may stay beside its own (training's run
            folder); otherwise a folder holding anything unlisted is refused.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        command: str,
        flag: str,
        overwrite: bool = False,
        overwrite_flag: str = "--overwrite_output_file",
        folder: bool = False,
        entry_names: re.Pattern | None = None,
        resume_hint: str | None = None,
        leaves_others: bool = False,
    ):
        self.path = Path(path)
        self.command = command
        self.flag = flag
        self.overwrite = overwrite
        self.overwrite_flag = overwrite_flag
        self.folder = folder
        self.entry_names = entry_names
        self.resume_hint = resume_hint
        self.leaves_others = leaves_others
        self.record_path = record_path(self.path, folder)
        self.record: OutputRecord | None = None  # this run's, once it writes
        self._lock = OutputLock(self.path, command, flag)

    def check(self, inputs: Iterable[str | os.PathLike | None] = (), *, resume: bool = False) -> OutputRecord | None:
        """Refuse, before any work, to write this output (`UsageError`); else the record of an earlier run of it.

        With `resume`, an earlier run's output of this command is accepted without the overwrite
        flag (the command then continues it; it must compare that run's settings with its own).
        """
        outputs = {self.flag: self.path}
        if not self.folder:
            outputs[f"{self.flag}'s record"] = self.record_path
        check_not_protected(self.flag, self.path)
        check_outputs_apart(outputs, inputs)
        if self.path.is_symlink():
            raise UsageError(f"{self.flag} {self.path} is a symbolic link; give the folder or file it stands for")
        if self.folder and self.path.exists() and not self.path.is_dir():
            raise UsageError(f"{self.flag} {self.path} is a file, not a folder")
        previous = self._previous()
        if previous is None:
            return None
        if not (self.overwrite or resume):
            resume_hint = f" (or {self.resume_hint})" if self.resume_hint else ""
            raise UsageError(
                f"{self.flag} {self.path} holds the output of an earlier run of {self.command} "
                f"({previous.state}); to run it again, pass {self.overwrite_flag} to replace it or choose another "
                f"{self.flag}{resume_hint}"
            )
        return previous

    def _previous(self) -> OutputRecord | None:
        """The record of this command's earlier output here; None when there is none; `UsageError` when what is
        there is not this command's to replace."""
        exists = self.path.exists()
        if self.folder:
            found = sorted(entry.name for entry in self.path.iterdir()) if exists else []
            if not found:
                return None
        elif not exists and not self.record_path.exists():
            return None
        record = OutputRecord.read(self.record_path)
        if record is None:
            what = f"{self.path} is not empty" if self.folder else f"{self.path if exists else self.record_path} exists"
            record_is = "is missing or not a record" if self.record_path.exists() else "is missing"
            raise UsageError(
                f"{self.flag}: {what} and was not written by {self.command} (its record {self.record_path.name} "
                f"{record_is}); nothing is replaced, even with {self.overwrite_flag}: move it away or choose another"
            )
        if record.written_by != self.command:
            raise UsageError(
                f"{self.flag} {self.path} was written by {record.written_by}, not {self.command}; nothing is "
                f"replaced: choose another"
            )
        if self.folder and found == [FOLDER_RECORD] and not record.entries:
            # An earlier run that wrote nothing (it failed, or was killed, as it started): nothing to keep.
            return None
        if self.folder:
            self._check_only_own_entries(record, found)
        return record

    def _check_only_own_entries(self, record: OutputRecord, found: list[str]) -> None:
        """Refuse a folder holding anything its record does not list, or a record listing what the command
        never writes (an edited or damaged record must not make a user's file deletable)."""
        strange = [name for name in record.entries if not self._is_entry_name(name)]
        if strange:
            raise UsageError(
                f"{self.record_path} lists {', '.join(strange[:3])}, which {self.command} never writes: the record "
                "was edited or damaged; nothing in the folder is replaced"
            )
        foreign = [
            name
            for name in found
            if name != FOLDER_RECORD
            and name not in record.entries
            and (not self.leaves_others or self._is_entry_name(name))
        ]
        for name, files in record.entries.items():
            foreign += unlisted_files(self.path / name, files)
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise UsageError(
                f"{self.flag} {self.path} holds {shown}, which {self.command} did not write; nothing is replaced: "
                "move those away or choose another"
            )

    def _is_entry_name(self, name: str) -> bool:
        plain = name not in ("", ".", "..", FOLDER_RECORD) and "/" not in name and "\\" not in name
        return plain and (self.entry_names is None or bool(self.entry_names.fullmatch(name)))

    def lock(self) -> OutputLock:
        """The output's lock, to hold (`with output.lock():`) for the whole run."""
        return self._lock

    def write_record(self, state: str = RUNNING, *, entries: dict | None = None, **sections) -> None:
        """Write this run's record (`state`, the folder's `entries` if given, `sections` added to the earlier ones);
        a folder is created."""
        if self.record is None:
            self.record = OutputRecord(self.command)
        if entries is not None:
            self.record.entries = entries
        self.record.sections.update(sections)
        self.record.state = state
        self.record.finished = _now() if state == COMPLETE else None
        write_json(self.record_path, self.record.to_json())

    @contextlib.contextmanager
    def writing(self, **sections) -> Iterator["Output"]:
        """Around the writing of a file output: the record says `running` during it, `complete` after it.

        On an exception the record is put back as it was (nothing was replaced: files are written
        atomically); after a kill it stays `running`.
        """
        before = self.record_path.read_bytes() if self.record_path.is_file() else None
        self.write_record(RUNNING, **sections)
        try:
            yield self
        except BaseException:
            if before is None:
                self.record_path.unlink(missing_ok=True)
            else:
                with contextlib.suppress(OSError):
                    self.record_path.write_bytes(before)
            raise
        self.write_record(COMPLETE)

    @contextlib.contextmanager
    def atomic_folder(self, **sections) -> Iterator[Path]:
        """A staging folder that replaces the folder output whole when the block succeeds (`files.atomic_folder`).

        Its record (`complete`, listing every entry written) goes in with it; an earlier output is
        checked again just before it is replaced, in case something was put in it meanwhile.
        """
        with atomic_folder(self.path, replace=self.overwrite) as staging:
            yield staging
            self.record = OutputRecord(self.command, entries=listing(staging))
            self.record.sections.update(sections)
            self.record.state, self.record.finished = COMPLETE, _now()
            write_json(staging / FOLDER_RECORD, self.record.to_json())
            self._previous()


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
            found.append(f"{prefix}{name}: {_shown(mine)} here, {_shown(other)} there")
    return found


def _shown(value) -> str:
    return json.dumps(value, default=str)[:60]


def listing(folder: Path) -> dict[str, list[str] | None]:
    """A folder's entries as a record lists them: a file -> None, a folder -> the files in it."""
    entries = {}
    for entry in sorted(folder.iterdir()):
        if entry.name == FOLDER_RECORD:
            continue
        if entry.is_dir() and not entry.is_symlink():
            entries[entry.name] = sorted(p.relative_to(entry).as_posix() for p in entry.rglob("*") if not p.is_dir())
        else:
            entries[entry.name] = None
    return entries


def unlisted_files(entry: Path, files: list[str] | None) -> list[str]:
    """The files of folder `entry` that `files` does not list (None: not listed yet, trusted), as 'entry/file'."""
    if files is None or not entry.is_dir() or entry.is_symlink():
        return []
    listed = set(files)
    return [
        f"{entry.name}/{relative}"
        for relative in sorted(p.relative_to(entry).as_posix() for p in entry.rglob("*") if not p.is_dir())
        if relative not in listed
    ]


def remove_entries(folder: Path, names: Iterable[str]) -> None:
    """Remove the entries `names` of `folder` (an earlier run's, replaced by this one)."""
    from .files import remove_stale_staging

    for name in names:
        entry = folder / name
        remove_stale_staging(entry)
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink(missing_ok=True)


def acquire_on_main(lock: OutputLock, accelerator) -> None:
    """Take `lock` on the main process of an Accelerate run; every process raises the same error when it is held.

    The refusal is one line on every process (each prints it once: see `errors.run_reporting_errors`),
    never a crash of the others waiting for the main process.
    """
    from accelerate.utils import broadcast_object_list

    message = [None]
    if accelerator.is_main_process:
        try:
            lock.acquire()
        except OutputLockedError as error:
            message = [str(error)]
    if accelerator.num_processes > 1:
        broadcast_object_list(message)
    if message[0] is not None:
        raise OutputLockedError(message[0])


def check_all(outputs: list[Output], inputs: Iterable[str | os.PathLike | None] = ()) -> None:
    """`Output.check` of every output of a run, and no two of them at one path or sharing a record."""
    inputs = list(inputs)
    seen: dict[Path, Output] = {}
    for output in outputs:
        output.check(inputs)
        for path in {output.path.resolve(), output.record_path.resolve()}:
            other = seen.setdefault(path, output)
            if other is not output:
                raise UsageError(
                    f"{other.flag} {other.path} and {output.flag} {output.path} would both be written at {path}: "
                    "give them different names"
                )


@contextlib.contextmanager
def writing(outputs: Iterable[Output], **sections) -> Iterator[None]:
    """Hold every output's lock, with its record `running` and then `complete` (`Output.writing`), around a run."""
    with contextlib.ExitStack() as stack:
        outputs = list(outputs)
        for output in outputs:
            stack.enter_context(output.lock())
        for output in outputs:
            stack.enter_context(output.writing(**sections))
        yield


def arguments_of(args) -> dict:
    """A command's parsed arguments as its record keeps them: paths as strings, secrets and callables left out."""
    kept = {}
    for name, value in vars(args).items():
        if callable(value) or "token" in name:
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, list | tuple):
            value = [os.fspath(item) if isinstance(item, os.PathLike) else item for item in value]
        kept[name] = value
    return {"arguments": kept}
