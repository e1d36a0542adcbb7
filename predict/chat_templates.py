"""A model's chat template rendered in a bounded child process: it is code from the model's author.

transformers renders a chat template in jinja2's sandbox, which keeps it from Python's internals
but not from looping for hours (`range` stops at 100,000 items, nested loops do not) or building
strings of any size (`'y' * 300000000`, then more: 22 GB before the kernel killed the run). And a
template fails in many ways of its own: a syntax error, `raise_exception(...)`, a message that is
not there, an `include` (the sandbox has no loader), an attribute the sandbox refuses.

So every prompt of a run is rendered up front, once, in a child process (`python -m
fiberbench.helper_processes`, whatever called the command) whose memory may grow by
`MEMORY_LIMIT` at most (`RLIMIT_AS`, Linux), each render stopped after `SECONDS_PER_PROMPT` (a
timer signal), each prompt at most `MAX_PROMPT_CHARS` long. Whatever goes wrong is one `DataError`
naming the model folder, never a traceback, a hang or a run killed for its memory.
"""

import os
import resource
import signal
from collections.abc import Callable

from fiberbench.errors import DataError
from fiberbench.helper_processes import HelperProcess, HelperTimeout

# A chat template renders a prompt in microseconds to milliseconds: these bounds leave a thousandfold margin.
SECONDS_PER_PROMPT = 2
MEMORY_LIMIT = 2**30  # bytes of address space beyond what the child holds once the renderer is loaded
MAX_PROMPT_CHARS = 100_000
# Starting the child: Python, then torch and transformers as the renderer (a tokenizer or processor) is unpickled.
SECONDS_TO_START = 120


class RenderingError(Exception):
    """What went wrong in the child, as the rest of the sentence "its chat template ..."."""


def render_bounded(render: Callable[..., str], prompts: list[tuple], model: str) -> dict[tuple, str]:
    """Each distinct prompt of `prompts` (the arguments of `render`: a caption, ...) -> `render(*prompt)`, computed
    in a bounded child process (`fiberbench.helper_processes`: it needs nothing of the caller's `__main__`).

    `render` (a predictor's bound method) is pickled to the child. `model` names the model in the
    `DataError` raised when the template fails, takes too long, takes too much memory or renders
    too long a prompt; a child that fails for another reason is a `HelperError` saying how.
    """
    prompts = list(dict.fromkeys(prompts))
    deadline = SECONDS_TO_START + SECONDS_PER_PROMPT * len(prompts)
    with HelperProcess("the process rendering the chat template") as child:
        child.send(_render_in_child, render, prompts)
        try:
            status, result = child.receive(timeout=deadline)
        except HelperTimeout:
            status, result = "error", f"took more than {deadline} s to render {len(prompts)} prompts"
    if status == "error":
        raise DataError(f"--model_name_or_path {model}: its chat template {result}")
    return dict(zip(prompts, result))


class _OutOfTime(BaseException):
    """A render's time is up: a BaseException, so that no `except Exception` in the renderer can swallow it."""


def _out_of_time(signum, frame):
    raise _OutOfTime


def _limit_memory(extra: int) -> None:
    """Let this process's address space grow by `extra` bytes at most: an allocation beyond is a MemoryError.

    Linux only (its /proc gives the size now); elsewhere the kernel does not enforce `RLIMIT_AS` anyway, and only
    the time bound applies.
    """
    try:
        with open("/proc/self/statm") as statm:
            used = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return
    resource.setrlimit(resource.RLIMIT_AS, (used + extra, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _render_in_child(render: Callable[..., str], prompts: list[tuple]) -> tuple[str, list[str] | str]:
    """The child: every prompt (the arguments of a render: a caption, ...) rendered under the bounds; returns
    ("texts", [...]) or ("error", the reason)."""
    try:
        _limit_memory(MEMORY_LIMIT)
        signal.signal(signal.SIGALRM, _out_of_time)
        texts = []
        for prompt in prompts:
            signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_PROMPT)
            try:
                text = render(*prompt)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if len(text) > MAX_PROMPT_CHARS:
                raise RenderingError(
                    f"rendered a prompt of {len(text):,} characters, more than the {MAX_PROMPT_CHARS:,} a prompt "
                    "may have"
                )
            texts.append(text)
        reply = ("texts", texts)
    except _OutOfTime:
        reply = ("error", f"took more than {SECONDS_PER_PROMPT} s to render one prompt (a loop that does not end?)")
    except MemoryError:
        reply = ("error", f"needed more than {MEMORY_LIMIT // 2**30} GiB of memory to render one prompt")
    except RenderingError as error:
        reply = ("error", str(error))
    except Exception as error:  # noqa: BLE001 - whatever the author's code raises is the author's to fix
        message = " ".join(str(error).split())
        reply = ("error", f"cannot be rendered ({type(error).__name__}: {message[:300]})")
    return reply
