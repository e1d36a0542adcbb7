"""Outputs that are never half-written, never destroy an input, and that colleagues can read.

Every file and folder the package writes goes through here:
- `atomic_path` (and `write_text`, `write_json`, `write_jsonl` on top of it) writes a file beside
  its destination and renames it into place, so a run killed at any moment leaves either the
  previous file or the new, complete one.
- `atomic_folder` does the same for a folder (a dataset, a saved model, a checkpoint): built in a
  hidden staging folder, renamed into place at the end, removed on failure. Temporary files and
  staging folders left by killed runs on this host are removed by the next write of the same path.
- Both give what they write the usual permissions (0644 files and 0755 folders under umask 022):
  `tempfile` makes its files 0600 and folders 0700, which colleagues on shared storage could not read.
- `check_outputs_apart` refuses, before any work, an output that is an input or lies inside (or
  holds) an input folder; `check_input_files` refuses an input file that is not there.
"""

import contextlib
import errno
import functools
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import UsageError

# Staging folders are named `.{name}.incomplete-{host}-{pid}-{random}` beside their destination.
STAGING_MARK = ".incomplete-"


@functools.cache
def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (`os.umask` sets it to read it)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii") as status:
            return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def file_mode() -> int:
    """The mode a new file gets from `open()`: 0o666 less the umask (0644 under umask 022)."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """The mode a new folder gets from `mkdir`: 0o777 less the umask (0755 under umask 022)."""
    return 0o777 & ~_umask()


def make_readable(folder: str | os.PathLike) -> None:
    """Give `folder` and everything in it the usual modes (libraries write some files through `tempfile`)."""
    folder = Path(folder)
    os.chmod(folder, folder_mode())
    for root, folders, files in os.walk(folder):
        for name in folders:
            os.chmod(Path(root, name), folder_mode())
        for name in files:
            if not Path(root, name).is_symlink():
                os.chmod(Path(root, name), file_mode())


def _fsync(path: Path) -> None:
    with open(path, "rb") as file:
        os.fsync(file.fileno())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, remove_stale: bool = True) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix) to write; it replaces `path` when the block succeeds.

    On an exception the temporary file is removed and `path` is left as it was; after a kill, the
    next `atomic_path` for the same `path` removes it. An `OSError` about the temporary file (a full
    disk, a folder in the way) is raised about `path`, the name the user knows.

    Looking for a killed run's temporary file lists the folder: a command that writes thousands of
    files into one folder passes `remove_stale=False` and sweeps the folder once instead
    (`remove_stale_temporaries`).
    """
    path = Path(path)
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if remove_stale:
            remove_stale_staging(path)
        descriptor, name = tempfile.mkstemp(
            dir=path.parent, prefix=f"{_staging_prefix(path)}{os.getpid()}-", suffix=f".tmp{path.suffix}"
        )
        os.close(descriptor)
        temporary = Path(name)
        yield temporary
        os.chmod(temporary, file_mode())
        _fsync(temporary)
        os.replace(temporary, path)
    except OSError as error:
        if error.filename in (None, str(temporary)) or error.filename2 is not None:
            raise OSError(error.errno, error.strerror, str(path)) from error
        raise
    finally:
        if temporary is not None:
            temporary.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, data) -> None:
    """Write `data` as indented JSON, atomically; NaN and infinity are refused (they are not JSON)."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def write_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write `records` as JSON Lines, one at a time and atomically; returns how many were written."""
    count = 0
    with atomic_path(path) as temporary, temporary.open("w", encoding="utf-8") as file:
        for count, record in enumerate(records, start=1):
            file.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
    return count


def _staging_prefix(path: Path) -> str:
    return f".{path.name}{STAGING_MARK}{socket.gethostname()}-"


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_staging(path: str | os.PathLike) -> list[Path]:
    """Remove the staging folders and temporary files of `path` left by processes of this host that are gone.

    Returns what was removed.

    Only this host's are considered: on shared storage another machine's process ids mean nothing here.
    """
    path = Path(path).absolute()
    prefix = _staging_prefix(path)
    candidates = path.parent.glob(f"{prefix}*") if path.parent.is_dir() else ()
    return _remove_if_stale([(candidate, candidate.name[len(prefix) :]) for candidate in candidates])


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Remove the staging folders and temporary files of every entry of `folder` left by this host's gone processes.

    One listing of the folder, for commands that write many files into it with
    `atomic_path(..., remove_stale=False)`. Returns what was removed.
    """
    folder = Path(folder).absolute()
    mark = f"{STAGING_MARK}{socket.gethostname()}-"
    candidates = folder.iterdir() if folder.is_dir() else ()
    return _remove_if_stale(
        [(candidate, candidate.name.split(mark, 1)[1]) for candidate in candidates if mark in candidate.name]
    )


def _remove_if_stale(candidates: list[tuple[Path, str]]) -> list[Path]:
    """Remove each staging entry whose name, after its prefix (`PID-...`), names a process of this host that is gone."""
    removed = []
    for candidate, rest in candidates:
        pid = rest.split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _is_running(int(pid)):
            if candidate.is_dir() and not candidate.is_symlink():
                shutil.rmtree(candidate, ignore_errors=True)
            else:
                candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


def publish_folder(staging: Path, path: Path, *, replace: bool = False) -> None:
    """Rename the finished `staging` folder to `path`.

    Without `replace`, an existing non-empty `path` is a `FileExistsError` (also when another run
    published there first: one run wins whole, the other fails). With `replace`, the old folder is
    moved aside, the new one renamed into place, and only then is the old one removed.
    """
    previous = None
    if replace and path.exists():
        previous = path.with_name(f"{_staging_prefix(path)}{os.getpid()}-previous")
        os.replace(path, previous)
    try:
        os.rename(staging, path)
    except OSError as error:
        if previous is not None:
            os.replace(previous, path)
        raise FileExistsError(f"{path} already exists (another run wrote it meanwhile?)") from error
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)


def staging_folder(path: str | os.PathLike) -> Path:
    """A new, empty hidden folder beside `path`, named as `atomic_folder` names its staging folders.

    The caller removes it when done with it; after a kill, the next `remove_stale_staging(path)`
    (or `atomic_folder(path)`) does.
    """
    path = Path(path).absolute()
    return Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(path)}{os.getpid()}-", dir=path.parent))


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """A hidden staging folder beside `path` to fill; it becomes `path` when the block succeeds.

    On an exception (or a kill) nothing appears at `path`; the staging folder is removed, or, after
    a kill, by the next `atomic_folder` (or `remove_stale_staging`) for the same `path`.
    See `publish_folder` for `replace`. An `OSError` about a file in the staging folder, or about
    no file (a full disk met by a library's writer), is raised about `path` or the same file in it,
    the names the user knows.
    """
    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(path)
    staging = staging_folder(path)
    try:
        yield staging
        make_readable(staging)
        publish_folder(staging, path, replace=replace)
    except OSError as error:
        inside = error.filename is not None and Path(error.filename).is_relative_to(staging)
        if error.errno is None or error.filename2 is not None or not (error.filename is None or inside):
            raise
        named = path / Path(error.filename).relative_to(staging) if inside else path
        raise OSError(error.errno, error.strerror, str(named)) from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _resolved(path: str | os.PathLike) -> Path:
    return Path(path).expanduser().resolve()


def file_identity(path: str | os.PathLike) -> tuple[int, int] | Path:
    """What makes two paths one file: its device and inode when it exists (so a hard link or a link is the file it
    names), else its resolved path."""
    try:
        info = os.stat(Path(path).expanduser())
    except OSError:
        return _resolved(path)
    return info.st_dev, info.st_ino


def check_input_files(paths: Iterable[str | os.PathLike | None]) -> None:
    """Refuse an input file that is missing or is a folder: the `OSError` that opening it would raise, naming it.

    Commands call it first, before the heavy libraries load, so that a mistyped name is answered in
    a fraction of a second rather than after torch, transformers or spaCy have started.
    """
    for path in paths:
        if path is None:
            continue
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))


def check_outputs_apart(
    outputs: dict[str, str | os.PathLike], inputs: Iterable[str | os.PathLike | None]
) -> None:
    """Refuse, before any work, an output that would destroy an input or cannot be written.

    Args:
        outputs: flag (e.g. "--output_file", "--output_dir") -> the path it writes. A flag ending in
            `_dir` may name a folder or a file in it; any other names a file, so an existing folder
            there is refused. A file standing where a folder of the path should be is refused.
        inputs: the files and folders the command reads (None entries are ignored).

    Raises:
        UsageError: an output is an input, lies inside an input folder, is a folder holding an
            input, is a folder where a file is expected, or lies under a file.
    """
    inputs = [_resolved(path) for path in inputs if path is not None]
    for flag, output in outputs.items():
        target = _resolved(output)
        if target.is_dir() and not flag.endswith("_dir"):
            raise UsageError(f"{flag} {output} is a folder; give a file name")
        blocking = next((parent for parent in target.parents if parent.exists() and not parent.is_dir()), None)
        if blocking is not None:
            raise UsageError(f"{flag} {output}: {blocking} is a file, not a folder")
        for source in inputs:
            if target == source or (target.exists() and file_identity(target) == file_identity(source)):
                problem = "is an input of this command"
            elif source in target.parents:
                problem = f"lies inside the input folder {source}"
            elif target in source.parents:
                problem = f"holds the input {source}"
            else:
                continue
            raise UsageError(f"{flag} {output} {problem}: it would be overwritten; write the output elsewhere")


def file_digest(path: str | os.PathLike) -> str:
    """`sha256:HEX` of a file's bytes (the Hub's own name for a file's content), read in 1 MiB chunks."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def folder_fingerprint(folder: str | os.PathLike) -> dict[str, str]:
    """Every file of `folder` (hidden ones left out) -> its size and `file_digest`: what a run read from it."""
    folder = Path(folder)
    return {
        path.relative_to(folder).as_posix(): f"{path.stat().st_size} bytes, {file_digest(path)}"
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    }
