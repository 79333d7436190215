"""Polling with a deadline for tests whose servers share the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def poll(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    within: float,
    what: str,
) -> T:
    """Call ``probe`` until ``accept`` likes its answer; fail with the last answer seen.

    The async twin of ``fleetwatch.procs.wait_until``, for tests whose servers share the
    event loop (a blocking poll would starve them).
    """
    deadline = time.monotonic() + within
    last: object = None
    while True:
        try:
            value = await probe()
        except Exception as exc:  # a server still starting refuses: "not yet"
            last = exc
        else:
            if accept(value):
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not seen within {within:.0f}s; last: {last!r}")
        await asyncio.sleep(0.1)  # poll interval, not a synchronisation
