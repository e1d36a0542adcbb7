"""The lock files of fiberbench: a file held with an advisory `flock`, naming the run that holds it.

Both locks of the package are made of these pieces: an output's (`OutputLock`, `.NAME.lock`),
which a second run into the output is refused, and a shared build's (`shared_build`,
`.NAME.building`), which a second run waits on. The kernel releases a `flock` when its process
ends however it ends, so a lock file whose holder has ended is found unheld and taken over; the
holder removes its file as it leaves, so a lock counts only on the file still at the lock's path.
The file's content only names the holder, for messages.
"""

import fcntl
import json
import os
import socket
import stat

from .records import now


def foreign_kind(info: os.stat_result) -> str | None:
    """What a file found where a file of ours should be is, when it cannot be ours: a link, a FIFO, a hard link..."""
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    if stat.S_ISFIFO(info.st_mode):
        return "a FIFO"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_nlink > 1:
        return "a hard link of another file"
    return None


def try_lock(descriptor: int) -> bool:
    """Take the exclusive `flock` of the file open as `descriptor` without waiting; False when another run holds it."""
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def is_at(path: os.PathLike, descriptor: int) -> bool:
    """Whether the file open as `descriptor` is the one at `path` now (not one its holder removed meanwhile)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)


def name_holder(descriptor: int, **more) -> None:
    """Write this process into the lock file as its holder: `more` (an output's command), host, PID and since when."""
    holder = {**more, "host": socket.gethostname(), "pid": os.getpid(), "started": now()}
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, (json.dumps(holder) + "\n").encode(), 0)


def read_holder(descriptor: int) -> dict | None:
    """The holder that the lock file open as `descriptor` names; None when its content names none."""
    try:
        holder = json.loads(os.pread(descriptor, 4096, 0).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) and {"host", "pid", "started"} <= holder.keys() else None


def in_words(holder: dict) -> str:
    """A lock file's holder as messages name it: 'fiberbench predict, PID 12 on host, since ...'."""
    run = f"PID {holder['pid']} on {holder['host']}, since {holder['started']}"
    return f"{holder['command']}, {run}" if "command" in holder else run
