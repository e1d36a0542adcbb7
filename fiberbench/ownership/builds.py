"""A cache entry that every run shares (the bundled sample built into the Hugging Face cache), built by one run only.

Of runs started together (two commands, or the processes of an `accelerate launch`), the first to
take the entry's build lock checks and builds it; the others wait on the lock, then find it built.
"""

import contextlib
import errno
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import DataError, UsageError
from .flock import foreign_kind, in_words, is_at, name_holder, read_holder, try_lock

logger = logging.getLogger(__name__)

# Runs started at the same time wait for the build of the first instead of failing, at most this long. Building
# the sample takes seconds; the bound only ends a wait on a build that hangs.
SHARED_BUILD_WAIT_SECONDS = 600
_SHARED_BUILD_POLL_SECONDS = 0.2


@contextlib.contextmanager
def shared_build(entry: Path, what: str, timeout: float = SHARED_BUILD_WAIT_SECONDS) -> Iterator[None]:
    """Hold the build lock of `entry`, an entry of a cache that every run shares, while checking and building it.

    Inside the block the caller checks whether `entry` is built and builds it if not: of runs
    started together, one builds and the others wait here, saying so in one log line, then find it
    built. The lock is `.NAME.building` beside the entry, a lock file of `fiberbench.ownership.flock`;
    it is opened without following links, and anything but a regular file there is refused.

    Raises:
        DataError: another run held the lock for more than `timeout` seconds (its build hangs), naming it.
        UsageError: something that is not a lock file of ours is at the lock's path.
    """
    lock_path = entry.with_name(f".{entry.name}.building")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    waiting = False
    while True:
        try:
            descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
            raise UsageError(f"{lock_path} is a symbolic link, not the build lock of {what}: remove it") from None
        if foreign_kind(os.fstat(descriptor)) is not None:
            os.close(descriptor)
            raise UsageError(f"{lock_path} is not the build lock of {what} (not a file of its own): remove it")
        if not try_lock(descriptor):
            os.close(descriptor)
            holder = _holder(lock_path)
            if time.monotonic() > deadline:
                raise DataError(
                    f"{entry}: another run ({holder}) has been building {what} there for more than {timeout:g} s; "
                    "end it if it hangs, then run again"
                )
            if not waiting:
                logger.warning(
                    "Waiting for another run (%s) to finish building %s into %s (at most %g s)",
                    holder,
                    what,
                    entry,
                    timeout,
                )
                waiting = True
            time.sleep(_SHARED_BUILD_POLL_SECONDS)
            continue
        if is_at(lock_path, descriptor):
            break
        os.close(descriptor)
    try:
        name_holder(descriptor)
        yield
    finally:
        lock_path.unlink(missing_ok=True)
        os.close(descriptor)


def _holder(lock_path: Path) -> str:
    """The run holding a build lock, in words."""
    try:
        descriptor = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "a process that has not said which yet"
    try:
        holder = read_holder(descriptor)
    finally:
        os.close(descriptor)
    return in_words(holder) if holder is not None else "a process that has not said which yet"
