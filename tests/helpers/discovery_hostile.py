"""A hostile management API for the list+watch tests: the stand-in's faults that break
every watch (or every request), and one bounded observation window that counts what the
process spent and how late its event loop ran meanwhile.

Used by ``tests/discovery`` (the Secrets' informer) and ``tests/reactor`` (the CD
watches): one reflector implementation, one set of modes (issue 31).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: mode -> the stand-in fault (``fleetwatch.standin.management.faults``) that makes it
HOSTILE: dict[str, dict[str, Any]] = {
    "410-event": {"kind": "watch_error"},  # ERROR event holding 410 Expired
    "410-http": {"kind": "error", "status": 410, "verb": "watch"},
    "error-event": {"kind": "watch_error", "status": 500},
    "closed-at-once": {"kind": "watch_close"},
    "garbage": {"kind": "watch_garbage"},
    "500": {"kind": "error", "status": 500},  # lists too
}

#: the observation window (s): long enough for three rounds of client-go's backoff
WINDOW = 4.0


def most_requests(seconds: float) -> float:
    """What one reflector may send in ``seconds``: "about two a second at first" (its
    first round, a list and a watch, comes at once; no backoff sends thousands)."""
    return 2 * seconds + 2


def requests(counts: Mapping[str, int], resource: str) -> int:
    return counts.get(f"list {resource}", 0) + counts.get(f"watch {resource}", 0)


@dataclass
class Observed:
    """A window: its length, the process's CPU share, the loop's lateness, a probe's times."""

    seconds: float
    cpu_share: float
    lags: list[float] = field(default_factory=list)
    probe_seconds: list[float] = field(default_factory=list)

    @property
    def lag_p90(self) -> float:
        return statistics.quantiles(self.lags, n=10)[-1]


async def observe(
    seconds: float = WINDOW,
    probe: Callable[[], Awaitable[None]] | None = None,
) -> Observed:
    """Watch the process for ``seconds``: a 20 ms ticker's lateness (another task of the
    loop), its CPU share (``process_time``: every thread, the in-process stand-in included),
    and, every 0.2 s, how long ``probe`` (an HTTP request to the server under test) took."""
    lags: list[float] = []
    probes: list[float] = []

    async def tick() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.02)
            lags.append(time.monotonic() - before - 0.02)

    async def poke() -> None:
        while probe is not None:
            before = time.monotonic()
            await probe()
            probes.append(time.monotonic() - before)
            await asyncio.sleep(0.2)

    cpu, wall = time.process_time(), time.monotonic()
    tasks = [asyncio.create_task(tick(), name="ticker"), asyncio.create_task(poke(), name="probe")]
    try:
        await asyncio.sleep(seconds)  # the window itself: a rate is measured over it
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    wall = time.monotonic() - wall
    return Observed(wall, (time.process_time() - cpu) / wall, lags, probes)
