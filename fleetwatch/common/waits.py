"""Waiting with a deadline without ever swallowing a cancellation.

On Python 3.11, ``asyncio.wait_for`` returns the awaited result instead of raising
``CancelledError`` when the task is cancelled in the same turn of the event loop as the
awaited thing completes (CPython gh-86296, fixed in 3.12 by rebuilding ``wait_for`` on
``asyncio.timeout``). A loop that waits for a wake-up event with ``wait_for`` then goes on
running after its owner cancelled it, and the owner's shutdown waits for it forever: the
reactor's CD actuator did exactly that under load, holding the app's cleanup (and so a
SIGTERM) until it was killed. ``asyncio.timeout`` counts cancellations (``uncancel``) and
never loses one, so every wait with a deadline in fleetwatch goes through it; a test
(ruff, TID251 in pyproject.toml) keeps ``asyncio.wait_for`` out of the product.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set, at most ``seconds``: True when it was set."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
