"""Watch events in a burst, and a list page, are handled in slices: the loop runs between.

Events already received come out of the watch stream without a suspension, so a stream
holding every Secret rewritten at once would otherwise be decoded and stored in one
callback while scrapes wait (issue 34). An in-memory API hands a reflector 1,000 events
with no await between them; a ticker task counts how many were stored between two of its
turns of the loop.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import pytest

from fleetwatch.discovery.secretwatch import WatchSpec
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.kube.reflector import Reflector

SPEC = WatchSpec("argocd", "argocd.argoproj.io/secret-type=cluster")
EVENTS = 1000


def secret(uid: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": str(rv)}, "data": {}}


class BurstApi:
    """An empty list, then one watch that yields ``EVENTS`` events without suspending."""

    def __init__(self) -> None:
        self.done = asyncio.Event()

    async def list(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    async def watch(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 (the Api protocol's)
    ) -> AsyncGenerator[dict[str, Any], None]:
        for i in range(EVENTS):
            yield {"type": "ADDED", "object": secret(f"u{i}", i + 2)}
        self.done.set()
        await asyncio.Event().wait()  # the watch stays open


async def stored_between_turns(per_slice: int) -> list[int]:
    """How many events the reflector stored between two turns of a ticker task."""
    api = BurstApi()
    reflector = Reflector(api, SPEC, InformerSettings(events_per_slice=per_slice))
    gaps: list[int] = []

    async def ticker() -> None:
        seen = 0
        while True:
            await asyncio.sleep(0)
            now = len(reflector.store)
            if now != seen:
                gaps.append(now - seen)
                seen = now

    tick = asyncio.create_task(ticker(), name="ticker")
    run = asyncio.create_task(reflector.run(), name="reflector")
    try:
        await asyncio.wait_for(api.done.wait(), 10)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    finally:
        for task in (run, tick):
            task.cancel()
        await asyncio.gather(run, tick, return_exceptions=True)
    assert len(reflector.store) == EVENTS
    assert sum(gaps) == EVENTS
    return gaps


@pytest.mark.parametrize("per_slice", [1, 50, 100])
async def test_a_burst_of_events_is_stored_in_slices_that_yield(per_slice: int) -> None:
    gaps = await stored_between_turns(per_slice)
    assert max(gaps) <= per_slice
    assert len(gaps) >= EVENTS // per_slice


async def test_the_default_slice_bounds_a_burst_to_a_hundred_events() -> None:
    assert InformerSettings().events_per_slice == 100
    gaps = await stored_between_turns(InformerSettings().events_per_slice)
    assert max(gaps) <= 100


class PageApi:
    """One list page of ``EVENTS`` items, answered without a suspension; no watch."""

    async def list(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        items = [secret(f"u{i}", 1) for i in range(EVENTS)]
        return {"items": items, "metadata": {"resourceVersion": "1"}}

    async def watch(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 (the Api protocol's)
    ) -> AsyncGenerator[dict[str, Any], None]:
        await asyncio.Event().wait()  # nothing after the list
        yield {}


async def test_a_list_page_is_transformed_in_slices_that_yield() -> None:
    """After a 410 every reflector lists at once: a page of items is transformed a slice at
    a time, the loop serving between two (before, a page was one callback)."""
    turns = 0
    seen_at: list[int] = []

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        seen_at.append(turns)
        return obj

    async def ticker() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    reflector = Reflector(PageApi(), SPEC, InformerSettings(), transform=transform)
    tick = asyncio.create_task(ticker(), name="ticker")
    run = asyncio.create_task(reflector.run(), name="reflector")
    try:
        for _ in range(10_000):
            if reflector.synced:
                break
            await asyncio.sleep(0)
    finally:
        for task in (run, tick):
            task.cancel()
        await asyncio.gather(run, tick, return_exceptions=True)
    assert len(reflector.store) == EVENTS
    per_turn = Counter(seen_at)  # items transformed between two turns of the ticker
    assert max(per_turn.values()) <= InformerSettings().events_per_slice
    assert len(per_turn) >= EVENTS // InformerSettings().events_per_slice
