"""Helper processes that owe nothing to the caller's `__main__`: children started as `python -m` of this module.

A command that runs work in another process (predict's chat-template renderer, blank's spaCy
parsers) must work however it was called: from the `fiberbench` command line, from a script
without an `if __name__ == "__main__":` guard, from a script read on standard input.
multiprocessing's spawn and forkserver children re-import the caller's main module first, which
runs such a script again (and fails), or looks for a file named `<stdin>`. A child started as
`python -m fiberbench.helper_processes` imports only this module and what the calls sent to it
name (module-level functions, pickled by reference), with the caller's `sys.path`.

A `HelperProcess` runs the calls sent to it one after the other, in order; `receive` gives back
each result in turn. Calls are written by a thread of their own, so that a caller sending ahead
while the child answers never deadlocks on full pipes. When the child fails, the `HelperError`
says what failed: the call's exception (its type and message), or the child's end (its exit
status and the last line it wrote on stderr), never only that "a process ended".
"""

import collections
import contextlib
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from .collector import collector_held_off
from .errors import FiberbenchError

_LENGTH = struct.Struct("!Q")  # each message: its length, then its pickle
_STDERR_LINES_KEPT = 20


class HelperError(FiberbenchError):
    """A helper process failed: a call raised, or the process ended before it answered."""


class HelperTimeout(HelperError):
    """A helper process did not answer in the time given."""


class HelperProcess:
    """One child `python -m fiberbench.helper_processes` running the calls sent to it, in order.

    Args:
        description: what the process is, for messages ("the process rendering the chat template").
    """

    def __init__(self, description: str):
        self.description = description
        self._child = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,  # unbuffered: `select` on the answers' pipe sees every byte there is
        )
        self._stderr = collections.deque(maxlen=_STDERR_LINES_KEPT)
        self._requests = queue.SimpleQueue()
        self._unanswered = 0  # calls sent whose results were not received
        self._threads = [
            threading.Thread(target=self._write_requests, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        # The first message: the caller's `sys.path`, as spawn passes it too (the modules the caller can import).
        self._requests.put(pickle.dumps(list(sys.path)))

    def send(self, function: Callable, *args) -> None:
        """Run `function(*args)` in the child after the calls sent before; `function` is a module-level function."""
        self._requests.put(pickle.dumps((function, args)))
        self._unanswered += 1

    def receive(self, timeout: float | None = None):
        """The result of the earliest call not received yet.

        Raises:
            HelperTimeout: no answer within `timeout` seconds.
            HelperError: the call raised, or the child ended first.
        """
        header = self._read(_LENGTH.size, timeout)
        status, value = pickle.loads(self._read(_LENGTH.unpack(header)[0], None))
        self._unanswered -= 1
        if status == "error":
            raise HelperError(f"{self.description} failed: {value}")
        return value

    def close(self) -> None:
        """End the child, killed if a call sent is still unanswered (it may never end), and wait for it."""
        self._requests.put(None)
        if self._unanswered:
            self._child.kill()
        try:
            self._child.wait(timeout=10)  # an idle child ends as its requests end
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        for thread in self._threads:
            thread.join(timeout=5)
        self._child.stdout.close()

    def __enter__(self) -> "HelperProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self, size: int, timeout: float | None) -> bytes:
        deadline = None if timeout is None else time.monotonic() + timeout
        data = b""
        while len(data) < size:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._child.stdout], [], [], left)[0]:
                raise HelperTimeout(f"{self.description} did not answer within {timeout:g} s")
            chunk = self._child.stdout.read(size - len(data))
            if not chunk:
                raise HelperError(self._ended())
            data += chunk
        return data

    def _ended(self) -> str:
        """What the child's end was, in words, once its answers' pipe is closed."""
        status = self._child.wait()
        self._threads[1].join(timeout=5)
        if status < 0:
            try:
                how = f"was killed by signal {signal.Signals(-status).name}"
            except ValueError:
                how = f"was killed by signal {-status}"
        else:
            how = f"ended with exit status {status}"
        said = next((line for line in reversed(self._stderr) if line), None)
        last = f"; its last line: {said}" if said else " without a word on stderr"
        return f"{self.description} (python -m {__name__}, PID {self._child.pid}) {how} before it answered{last}"

    def _write_requests(self) -> None:
        try:
            while (request := self._requests.get()) is not None:
                self._child.stdin.write(_LENGTH.pack(len(request)) + request)
        except (BrokenPipeError, ValueError):  # the child ended; `receive` says how
            pass
        finally:
            try:
                self._child.stdin.close()
            except BrokenPipeError:
                pass

    def _read_stderr(self) -> None:
        for line in self._child.stderr:
            self._stderr.append(" ".join(line.decode(errors="replace").split()))
        self._child.stderr.close()


def serve() -> None:
    """The child: run each call read from stdin and write its result, or its exception, to stdout."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    # Whatever a call prints goes to stderr: stdout carries the answers alone.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer
    sys.path[:] = pickle.loads(_message(requests, requests.read(_LENGTH.size)))
    first_call = True
    while header := requests.read(_LENGTH.size):
        call = _message(requests, header)
        # Unpickling imports the modules the call names (a module the caller could import and this process cannot
        # fails here). The first call's also builds what the process works with (a tokenizer, a processor): its
        # loading, with the collector held off. Not the later calls': each block freezes what the process holds,
        # and a parser's thousands of batches would freeze their garbage with it.
        unpickling = collector_held_off() if first_call else contextlib.nullcontext()
        first_call = False
        try:
            with unpickling:
                function, args = pickle.loads(call)
            answer = ("ok", function(*args))
        except Exception as error:  # noqa: BLE001 - the caller says what failed, in one line
            message = " ".join(str(error).split())
            answer = ("error", f"{type(error).__name__}: {message[:500]}" if message else type(error).__name__)
        data = pickle.dumps(answer)
        answers.write(_LENGTH.pack(len(data)) + data)
        answers.flush()


def _message(requests, header: bytes) -> bytes:
    return requests.read(_LENGTH.unpack(header)[0])


if __name__ == "__main__":
    from fiberbench.helper_processes import serve as serve_here  # the module by its name, as the calls refer to it

    serve_here()
