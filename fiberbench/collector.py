"""Python's cyclic garbage collector held off where a command builds a great many objects and few garbage cycles.

CPython's collector walks the objects it tracks each time their number has grown by enough: the
young ones often, all of them each time the heap has grown by a quarter, and all again as the
interpreter exits. A block that builds a great many objects is walked again and again, for
nothing where refcounting frees them and where they live on:
- a command's loading: importing torch and transformers builds about 700,000 objects that live as
  long as the process (modules, classes, functions, op registrations). `import
  fiberbench.training.run` takes 3.4-4.2 CPU-s on this project's 2-core machine, and 2.0 with the
  collector held off and what it built then frozen;
- scoring: `fiberbench evaluate` builds millions of small lists and dicts (rows, answers, scores),
  and the walks over them were a third of its time at 100,000 blanks.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_held_off() -> Iterator[None]:
    """Run the block with the collector held off, then freeze everything the process holds (`gc.freeze`, as the gc
    documentation has it for what a program loads at its start) and let the collector run again.

    No later collection walks the frozen objects, not even at exit; refcounting still frees them, but a frozen
    object that ends up in a garbage cycle stays for the rest of the process, and so do the garbage cycles still
    there when the block ends, its own and any left from before: for the imports of torch and transformers about
    10,000 small objects (closures, classes), for an evaluation about 500 (at 1,000 blanks and at 100,000). So a
    block is for what a process loads once (imports; reading a model, a pipeline or a processor) or builds as plain
    data, never for a loop that runs a model, and a process enters few. Nested blocks (in one thread) hold the
    collector off until the outermost ends; a block entered with the collector off leaves it off and freezes
    nothing.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.enable()
