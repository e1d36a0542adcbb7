"""The errors a user can cause, which every `fiberbench` command and `training/train.py` report in one line.

A `FiberbenchError` is never a bug: its message names what to fix (the file, the record and the
field, or the flag), and the command line prints it without a traceback (`--debug` shows one).
Both classes are `ValueError`s, so library callers can catch them as the usual bad-value error.
"""

import contextlib
import os
import reprlib
import sys
import time
from collections.abc import Callable, Iterator

# How long a process of a multi-process launch that leaves an error to the main process waits before it leaves.
MAIN_PROCESS_SAYS_WITHIN_SECONDS = 10.0
# A message is cut after this many characters: one that quotes a huge input stays one readable line.
MAX_MESSAGE_CHARS = 1000
# Python's repr of a value, cut level by level: never built whole (see `quoted`). Python 3.11's Repr takes no
# keyword arguments.
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxstring, _SHORT_REPR.maxother = 2, 60, 60
_SHORT_REPR.maxtuple = _SHORT_REPR.maxlist = _SHORT_REPR.maxdict = _SHORT_REPR.maxset = 4


class FiberbenchError(ValueError):
    """A user error; `exit_status` is what a command exits with."""

    exit_status = 1


class DataError(FiberbenchError):
    """Input data that cannot be used: a missing or unreadable file, a wrong format, a bad record."""

    exit_status = 1


class UsageError(FiberbenchError):
    """A flag value or combination that cannot work, found before any work is done."""

    exit_status = 2


def quoted(value: object) -> str:
    """`repr(value)` cut to a few lines' worth, for a message that quotes a user's value.

    Built level by level with `reprlib`: the whole repr of a YAML "billion laughs" value (nine
    aliases of nine aliases of ... "lol") would be 3.5 GB.
    """
    return _SHORT_REPR.repr(value)


def describe(error: BaseException) -> str:
    """One line for a user error; an `OSError` names its file ("x.json: No such file or directory").

    A message longer than `MAX_MESSAGE_CHARS` is cut there and says how long it was.
    """
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    text = str(error)
    if len(text) > MAX_MESSAGE_CHARS:
        return f"{' '.join(text[:MAX_MESSAGE_CHARS].split())} [... {len(text):,} characters in all]"
    return " ".join(text.split()) or type(error).__name__


@contextlib.contextmanager
def alike_on_every_process() -> Iterator[None]:
    """Around checks that every process of a multi-process launch makes alike (the flags, the inputs, the outputs):
    a user error raised in the block is the same on every process, so only the main one says it.

    `run_reporting_errors` reads the mark. Errors raised elsewhere, which may be one process's own
    (its share of the data), are said by the process that raised them.
    """
    try:
        yield
    except (FiberbenchError, OSError) as error:
        error.alike_on_every_process = True
        raise


def run_reporting_errors(function: Callable[[], int | None], prog: str, debug: bool = False) -> int:
    """Run a command's `function`; a user error becomes one line on stderr and the command's exit status.

    User errors are `FiberbenchError`s and `OSError`s (a missing file, a full disk, a refused
    connection). Anything else is a bug and keeps its traceback. With `debug` (`--debug`, or
    `FIBERBENCH_DEBUG=1` in the environment) user errors keep theirs too. Under a multi-process
    launch (`accelerate launch`, torchrun: `RANK` in the environment), an error that every process
    raised alike (`alike_on_every_process`) is said by the main process alone; each process still
    exits with the error's status.
    """
    debug = debug or os.environ.get("FIBERBENCH_DEBUG", "") not in ("", "0")
    try:
        return function() or 0
    except (FiberbenchError, OSError) as error:
        if debug:
            raise
        if os.environ.get("RANK", "0") == "0" or not getattr(error, "alike_on_every_process", False):
            print(f"{prog}: error: {describe(error)}", file=sys.stderr, flush=True)
        else:
            # The launcher stops every process once one has failed: leaving first, this one could have the main
            # process stopped before it says the error. The main process, making the same checks, says it and
            # leaves within this time, and the launcher then stops this one.
            time.sleep(MAIN_PROCESS_SAYS_WITHIN_SECONDS)
        return getattr(error, "exit_status", 1)


def users_cause(error: BaseException) -> BaseException | None:
    """The invalid record, unreadable file or full disk behind a library's error: the user's to fix, reported as it is.

    `datasets` wraps whatever its generator or writer raised (`DatasetGenerationError`), and a
    writer may fail again on its way out (pyarrow's "Operation on closed file" after a full disk),
    so the whole chain of causes and contexts is read. None when no such cause is in it.
    """
    seen = set()
    cause = error.__cause__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, FiberbenchError | OSError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
