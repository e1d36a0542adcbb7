"""What every command that writes promises (docs/reliability.md), as plain functions it calls in order.

    with output_lock(path, flag):                                  # a second run into `path` is refused
        previous = check_output(path, command=..., flag=..., ...)  # refused, or this command's earlier record
        record = start_output(path, command, previous, ...)        # its earlier files go; the record says "running"
        ...                                                        # write, each file through `atomic_path`
        finish_output(path, record)                                # "complete", listing the files written

The record is `fiberbench_output.json` inside a folder, `X.metadata.json` beside a file `X.ext`: the command, the
package version, host, PID and times, its state (`running` until the run ends: a killed run's output says it is
unfinished), a folder's files, and the command's own sections (its arguments, predict's settings).
"""

import contextlib
import datetime
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import filelock

from . import __version__
from .errors import UsageError

FOLDER_RECORD = "fiberbench_output.json"
# Read once, at import, while no other thread can see the brief change (os.umask sets it to read it).
_UMASK = os.umask(0o022)
os.umask(_UMASK)
RUNNING, COMPLETE = "running", "complete"


def record_path(path: str | os.PathLike, folder: bool) -> Path:
    """Where an output's record is: inside a folder, beside a file (`preds.jsonl` -> `preds.metadata.json`)."""
    path = Path(path)
    return path / FOLDER_RECORD if folder else path.with_name(f"{path.stem}.metadata.json")


def read_record(path: str | os.PathLike, folder: bool) -> dict | None:
    """The record of output `path`, or None when there is none that fiberbench wrote."""
    try:
        record = json.loads(record_path(path, folder).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("written_by"), str) else None


@contextlib.contextmanager
def output_lock(path: str | os.PathLike, flag: str) -> Iterator[None]:
    """Hold `.NAME.lock` beside output `path` for the run: a second run into it is refused, naming the first.

    The operating system releases the lock when its process ends, however it ends.
    """
    path = _canonical(path)
    if not path.name:
        raise UsageError(f"{flag} {path} is the root folder: choose a new folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(path.with_name(f".{path.name}.lock"), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise UsageError(
            f"{flag} {path} is being written by another run ({_holder(lock.lock_file, path)}); wait for it or choose "
            "another"
        ) from None
    try:
        yield
    finally:
        lock.release()


def check_output(
    path: str | os.PathLike,
    *,
    command: str,
    flag: str,
    overwrite: bool = False,
    inputs: Iterable[str | os.PathLike | None] = (),
    folder: bool = False,
    resume: bool = False,
) -> dict | None:
    """Refuse, before any work, to write output `path` (`UsageError`); else the record of this command's earlier
    output there (None: nothing there), which the command replaces (`overwrite`) or continues (`resume`)."""
    overwrite_flag = f"--overwrite_{flag.lstrip('-')}"
    given, path = path, _canonical(path)
    _check_not_protected(flag, given, path)
    _check_apart(flag, given, path, folder, inputs)
    if path.is_symlink():
        raise UsageError(f"{flag} {given} is a symbolic link; give the folder or file it stands for")
    if path.exists() and path.is_dir() != folder:
        raise UsageError(f"{flag} {given} is {'a file, not a folder' if folder else 'a folder; give a file name'}")
    found = _files(path) if folder else [path.name] if path.exists() else []
    if not found and not (not folder and record_path(path, folder).exists()):
        return None
    record = read_record(path, folder)
    if record is not None and not folder and record.get("file", path.name) != path.name:
        raise UsageError(
            f"{flag} {given}: its record's name, {record_path(path, folder).name}, is taken by the record of "
            f"{record['file']}: give the output another name"
        )
    if record is None or record["written_by"] != command:
        what = f"was written by {record['written_by']}" if record else f"has no record {record_path(path, folder).name}"
        raise UsageError(
            f"{flag} {given} exists and {what}, not {command}'s; nothing is replaced"
            + (f", even with {overwrite_flag}" if overwrite else "") + ": move it away or choose another"
        )
    if folder:
        strangers = sorted(set(found) - set(record.get("files", [])) - {FOLDER_RECORD})
        if strangers:
            shown = ", ".join(strangers[:3]) + (f" and {len(strangers) - 3} more" if len(strangers) > 3 else "")
            raise UsageError(
                f"{flag} {given} holds {shown}, which {command} did not write (or a killed run did not list); nothing "
                "is replaced: move those away or choose another"
            )
    if not (overwrite or resume):
        raise UsageError(
            f"{flag} {given} holds the output of an earlier run of {command} ({record.get('state')}); pass "
            f"{overwrite_flag} to replace it, or choose another"
        )
    return record


def start_output(
    path: str | os.PathLike, command: str, previous: dict | None, *, folder: bool, resume: bool = False, **sections
) -> dict:
    """Begin writing output `path`: the files of the `previous` run's record are deleted (unless it is `resume`d:
    then they are kept and listed on), and this run's record says `running`. Returns the record."""
    path = _canonical(path)
    for folder_path in ([Path(root) for root, _, _ in os.walk(path)] if folder else [path.parent]):
        _remove_stale(folder_path, "." if folder else f".{path.name}.")
    kept = previous.get("files", []) if previous and resume else []
    if previous and not resume:
        _remove_listed(path, previous.get("files", []) if folder else [path.name])
    if folder:
        path.mkdir(parents=True, exist_ok=True)
    record = {"written_by": command, "state": RUNNING, "fiberbench_version": __version__, "host": socket.gethostname(),
              "pid": os.getpid(), "started": _now(), "finished": None,
              **({"files": kept} if folder else {"file": path.name}), **sections}
    write_json(record_path(path, folder), record)
    return record


def finish_output(path: str | os.PathLike, record: dict, *, state: str = COMPLETE, **sections) -> None:
    """Write `record` again (`state`, `sections` added), listing the files now in a folder output; `state=RUNNING`
    updates a run's record as it goes (training at each save), so that a killed run lists what it wrote."""
    path = _canonical(path)
    record.update(sections, state=state, finished=_now() if state == COMPLETE else None)
    folder = "files" in record
    if folder:
        record["files"] = [name for name in _files(path) if name != FOLDER_RECORD]
    write_json(record_path(path, folder), record)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside `path` to write; it replaces `path` when the block succeeds, and is removed if not.

    A killed run leaves at most a hidden `.NAME.tmp-PID-*` beside `path`, which the next run's `start_output`
    removes.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-{os.getpid()}-", suffix=path.suffix)
    os.close(descriptor)
    temporary = Path(name)
    try:
        yield temporary
        # mkstemp's files are 0600: colleagues on shared storage could not read them.
        os.chmod(temporary, 0o666 & ~_UMASK)
        os.replace(temporary, path)
    except OSError as error:
        if error.filename is None:  # a full disk shows when a file is written or closed, naming no file: name the output
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise
    finally:
        temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """A hidden folder beside `path` to fill; it replaces `path` whole when the block succeeds, and is removed if
    not (after a kill, by the next write of `path`)."""
    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path.parent, f".{path.name}.")
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-{os.getpid()}-"))
    try:
        yield staging
        for folder, _, _ in os.walk(staging):  # mkdtemp's folders, and some libraries', are 0700
            os.chmod(folder, 0o777 & ~_UMASK)
        previous = staging.with_name(staging.name + "-previous")
        if path.exists():
            os.replace(path, previous)
        os.replace(staging, path)
        shutil.rmtree(previous, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, data) -> None:
    """Write `data` as indented JSON, atomically; NaN and infinity are refused (they are not JSON)."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def write_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write `records` as JSON Lines, atomically; returns how many were written."""
    count = 0
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8") as file:
        for count, record in enumerate(records, start=1):
            file.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
    return count


def _canonical(path: str | os.PathLike) -> Path:
    """One spelling of an output (`run`, `run/sub/..`, `link_to_parent/run`): its parent folders resolved, so that
    all share one lock and one record; the last name is kept, so that a link there is refused, never followed."""
    path = Path(path).expanduser()
    return path.resolve() if path.name in ("", ".", "..") else path.parent.resolve() / path.name


def _check_not_protected(flag: str, given, path: Path) -> None:
    resolved = path.resolve()
    if resolved == Path(resolved.anchor):
        raise UsageError(f"{flag} {given} is the root folder: choose a new folder")
    for name, place in (("the current directory", Path.cwd()), ("the home directory", Path.home())):
        if resolved == place.resolve() or resolved in place.resolve().parents:
            raise UsageError(f"{flag} {given} is {name} or a folder above it: choose a new folder")


def _check_apart(flag: str, given, path: Path, folder: bool, inputs: Iterable) -> None:
    """Refuse an output that is an input (a hard link of one included), lies inside an input folder or holds one."""
    targets = [path] if folder else [path, record_path(path, folder)]
    for source in (Path(item).expanduser().resolve() for item in inputs if item is not None):
        for target in targets:
            same = target.resolve() == source or (target.exists() and source.exists() and os.path.samefile(target, source))
            problem = ("is an input of this command" if same else f"lies inside the input folder {source}"
                       if source in target.parents else f"holds the input {source}" if target in source.parents else None)
            if problem:
                raise UsageError(f"{flag} {given} {problem}: it would be overwritten; write the output elsewhere")


def _files(folder: Path) -> list[str]:
    """The files of `folder` (links included, never followed) and its empty folders (`name/`), relative; a running
    write's temporary files (`.NAME.tmp-PID-*`) left out."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.rglob("*") if ".tmp-" not in p.name or not p.name.startswith(".")]
    return sorted(
        p.relative_to(folder).as_posix() + ("/" if p.is_dir() and not p.is_symlink() else "")
        for p in found if p.is_symlink() or not p.is_dir() or not any(p.iterdir())
    )


def _remove_listed(folder_or_file: Path, names: Iterable[str]) -> None:
    """Delete the listed files of an earlier run (inside `folder_or_file` only), then the folders they leave empty."""
    folder = folder_or_file if folder_or_file.is_dir() else folder_or_file.parent
    for name in names:
        file = folder / name
        if ".." not in Path(name).parts and not Path(name).is_absolute() and not file.is_dir():
            file.unlink(missing_ok=True)
    if folder_or_file.is_dir():
        for sub in sorted((p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()), reverse=True):
            with contextlib.suppress(OSError):  # a user's file keeps its folder
                sub.rmdir()


def _remove_stale(folder: Path, prefix: str) -> None:
    """Remove the temporary files and folders (`.NAME.tmp-PID-*`) in `folder` whose names start with `prefix`, of
    this host's processes that are gone (killed runs')."""
    with contextlib.suppress(FileNotFoundError):
        for stale in folder.iterdir():
            pid = stale.name.rpartition(".tmp-")[2].split("-", 1)[0]
            if stale.name.startswith(prefix) and ".tmp-" in stale.name and pid.isdigit() and int(pid) != os.getpid() \
                    and not Path(f"/proc/{pid}").exists():
                shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)


def _holder(lock_file: str, path: Path) -> str:
    """The run holding the lock in words, from its record when it has written one, else from the kernel's table of
    locks (Linux's /proc/locks: 'PID 12: fiberbench stats val.json')."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        inode = str(os.stat(lock_file).st_ino)
        pid = next(f[4] for f in map(str.split, Path("/proc/locks").read_text().splitlines())
                   if len(f) > 5 and f[5].rsplit(":", 1)[-1] == inode)
        record = read_record(path, folder=path.is_dir()) or read_record(path, folder=False) or {}
        if str(record.get("pid")) == pid and record.get("state") == RUNNING:
            return f"{record['written_by']}, PID {pid} on {record.get('host')}"
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        return f"PID {pid}: {command[:120]}"
    return "a process of another machine, or one that has just ended"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

