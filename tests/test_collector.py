"""`fiberbench.collector.collector_held_off`: no cyclic collection inside the block; afterwards what it built is
frozen (never walked again, still freed by refcounting) and the collector runs as before."""

import gc
import weakref

import pytest

from fiberbench.collector import collector_held_off


class Node:
    """An object the collector tracks, which a weak reference can watch."""


def frozen(obj) -> bool:
    """Whether the collector holds `obj` in its permanent generation: tracked, yet in none of the generations it walks.

    Asked of the object itself, not of `gc.get_freeze_count()`: other threads of the process (pytest-xdist's
    execnet ones) free frozen objects at any moment, so the count can drop while a test runs.
    """
    return gc.is_tracked(obj) and not any(tracked is obj for tracked in gc.get_objects())


@pytest.fixture
def collector_on():
    """The collector on for the test, and afterwards as it was (the next tests in this process need it as it was)."""
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_block_runs_without_collections_and_what_it_built_is_frozen(collector_on):
    collections = []

    def counted(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    with collector_held_off():
        assert not gc.isenabled()
        # Counted from inside the block: entering it allocates, and may meet a collection that is due.
        gc.callbacks.append(counted)
        try:
            built = [Node() for _ in range(50_000)]  # far past the youngest generation's threshold of 700
        finally:
            gc.callbacks.remove(counted)
    assert collections == []
    assert gc.isenabled()
    assert frozen(built[0]) and frozen(built[-1])


def test_a_frozen_object_is_still_freed_by_refcounting(collector_on):
    with collector_held_off():
        node = Node()
    watched = weakref.ref(node)
    del node
    assert watched() is None


def test_nested_blocks_hold_the_collector_off_until_the_outermost_ends(collector_on):
    with collector_held_off():
        with collector_held_off():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_block_entered_with_the_collector_off_leaves_it_off_and_freezes_nothing(collector_on):
    gc.disable()
    with collector_held_off():
        built = [Node() for _ in range(1000)]
    assert not gc.isenabled()
    assert gc.is_tracked(built[0]) and not frozen(built[0])


def test_the_collector_runs_again_after_a_block_that_raised(collector_on):
    with pytest.raises(KeyError):
        with collector_held_off():
            raise KeyError("a model that cannot be read")
    assert gc.isenabled()
