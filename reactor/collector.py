"""The garbage collector's policy in the reactor process: ``fleetwatch.common.gcpolicy``,
with a minute for its cycle.

Why. With ``--discovery.kubernetes`` and the CD mirror the reactor keeps what its
informers list, and what it read of it: at 20,000 Argo CD cluster Secrets and 10,000 Flux
and Argo CD objects, hundreds of thousands of long-lived objects. CPython's automatic full
collections walked all of them for nothing (none freed anything): 130-360 ms each, every
second or two while the lists came in and every 5-6 s after, and every call the reactor
served waited for them (webhooks and ``POST /deployments`` p99 170-180 ms on a quiet
reactor, against 3 ms at the median; bench/reactor_lists.py).
Freezing the start-up objects alone, as before, left out everything listed later.

The policy. At start-up, once the store and discovery are up: one full collection, what
start-up built frozen, and no automatic full collection from then on. Every
:data:`CYCLE_S` the survivors are frozen, and every :data:`FULL_EVERY` cycles one full
collection of everything runs: the only pause that walks the whole heap (a few hundred
milliseconds at the size above, once in ten minutes), and the longest a garbage cycle
waits to be freed. The young generations are collected as CPython does.

Process-wide, so the command installs it (``reactor.cli``), not the app: a test's app
keeps CPython's defaults.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from fleetwatch.common.gcpolicy import CollectorPolicy

#: Seconds of the policy's cycle: the survivors are frozen this often.
CYCLE_S = 60.0
#: Cycles between two full collections (ten minutes).
FULL_EVERY = 10


def collector_policy(
    cycle_s: float = CYCLE_S, full_every: int = FULL_EVERY
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The policy as an ``app.cleanup_ctx`` entry: installed at start-up, its timer
    stopped at shutdown."""

    async def policy(app: web.Application) -> AsyncIterator[None]:
        collector = CollectorPolicy(full_every=full_every)
        gc.collect()
        collector.install()
        gc.freeze()
        task = asyncio.create_task(_cycles(collector, cycle_s), name="fleetwatch-gc-policy")
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    return policy


async def _cycles(collector: CollectorPolicy, cycle_s: float) -> None:
    while True:
        await asyncio.sleep(cycle_s)  # product pacing: the policy's cycle
        collector.cycle_ended()
