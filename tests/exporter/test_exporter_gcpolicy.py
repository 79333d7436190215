"""The collector's policy: each cycle's survivors frozen, garbage cycles among them freed on
the full collection every ``full_every`` cycles, never later."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from fleetwatch.common.gcpolicy import CollectorPolicy
from tests.helpers.garbage import Node, garbage_cycle


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    """No automatic collection during a test (it would free the cycles before the policy
    freezes them); the next test gets the collector thawed and enabled again."""
    was_enabled = gc.isenabled()
    thresholds = gc.get_threshold()
    gc.disable()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if was_enabled:
        gc.enable()


def test_what_a_cycle_leaves_is_frozen_and_the_next_full_collection_frees_its_cycles() -> None:
    policy = CollectorPolicy(full_every=3)
    gc.collect()
    kept = Node()  # alive through the whole test: frozen, never freed
    policy.cycle_ended()  # 1
    assert gc.get_freeze_count() > 0
    alive = weakref.ref(kept)
    # A pair in a cycle that was alive (so frozen) when the cycle ended, dropped after.
    pair = garbage_cycle()
    policy.cycle_ended()  # 2: the pair is frozen now
    gc.collect()
    assert pair() is not None, "frozen: an ordinary collection does not see it"
    policy.cycle_ended()  # 3: the full collection, everything thawed first
    assert pair() is None
    assert alive() is kept
    assert gc.get_freeze_count() > 0  # and frozen again for the next cycles


def test_frozen_objects_are_still_freed_by_reference_counting() -> None:
    policy = CollectorPolicy(full_every=100)
    node = Node()
    gone = weakref.ref(node)
    policy.cycle_ended()
    del node
    assert gone() is None


def test_full_every_must_be_positive() -> None:
    with pytest.raises(ValueError):
        CollectorPolicy(full_every=0)


def _survivors_made(count: int) -> list[Node]:
    """``count`` objects that stay alive: they go through the young generations to the old
    one, as a cycle's new states do, which is what triggers CPython's full collections."""
    return [Node() for _ in range(count)]


def test_installed_no_automatic_full_collection_runs_but_the_young_ones_do() -> None:
    young, middle, _ = gc.get_threshold()
    gc.collect()
    gc.enable()
    full, young_runs = gc.get_stats()[2]["collections"], gc.get_stats()[0]["collections"]
    kept = _survivors_made(200 * young * middle)
    assert gc.get_stats()[2]["collections"] > full, "CPython's defaults: full collections"
    CollectorPolicy().install()
    assert gc.get_threshold()[:2] == (young, middle)
    full = gc.get_stats()[2]["collections"]
    kept += _survivors_made(200 * young * middle)
    assert gc.get_stats()[0]["collections"] > young_runs
    assert gc.get_stats()[2]["collections"] == full, "installed: none automatic"
    del kept
