"""The reactor's garbage-collector policy (reactor.collector): while it serves, no automatic
full collection walks what the informers hold; its own full collection frees a garbage
cycle within ``full_every`` cycles.

Before it, only the start-up objects were frozen: at 20,000 Secrets and 10,000 CD objects
CPython's full collections paused every call for 130-360 ms every few seconds
(bench/reactor_lists.py). The collector is process-wide: each test restores it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from aiohttp import web

from reactor.collector import collector_policy
from tests.helpers.garbage import garbage_cycle
from tests.helpers.reactor_helpers import until


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    """CPython's defaults for the test (as a process starts), and back after it."""
    was_enabled = gc.isenabled()
    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if not was_enabled:
        gc.disable()


def full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


async def test_no_automatic_full_collection_while_the_reactor_serves() -> None:
    """What an informer keeps as it lists (here 300,000 small containers, kept): CPython
    would walk the whole heap several times meanwhile; under the policy, never."""
    contexts = collector_policy(cycle_s=3600)(web.Application())
    await anext(contexts)
    try:
        before = full_collections()
        kept = [{"uid": str(i), "data": [i]} for i in range(300_000)]
        assert full_collections() == before, "an automatic full collection ran"
        assert len(kept) == 300_000
    finally:
        with pytest.raises(StopAsyncIteration):
            await anext(contexts)


async def test_its_own_full_collection_frees_a_garbage_cycle_within_full_every_cycles() -> None:
    contexts = collector_policy(cycle_s=0.02, full_every=3)(web.Application())
    await anext(contexts)
    try:
        gc.disable()  # only the policy's collections: young ones would free it too
        ref = garbage_cycle()
        await until(lambda: ref() is None, 5, what="the cycle freed by the policy")
    finally:
        with pytest.raises(StopAsyncIteration):
            await anext(contexts)
