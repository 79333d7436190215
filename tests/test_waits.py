"""fleetwatch.common.waits: a wait with a deadline that never loses a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from fleetwatch.common.waits import wait_event


async def test_set_before_the_deadline_is_true_and_the_deadline_is_false() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.0) is False
    asyncio.get_running_loop().call_soon(event.set)
    assert await wait_event(event, 30.0) is True
    assert await wait_event(event, -1.0) is True  # already set: no wait at all


async def test_a_cancel_in_the_turn_the_event_fires_still_cancels() -> None:
    """The race of CPython gh-86296: the event is set and the waiting task cancelled in
    the same turn of the loop. asyncio.wait_for on 3.11 returns normally there, and a
    loop built on it (the CD actuator's) runs on after its owner cancelled it."""
    event = asyncio.Event()
    passes = 0

    async def loop_until_cancelled() -> None:
        nonlocal passes
        while True:
            await wait_event(event, 30.0)
            event.clear()
            passes += 1

    task = asyncio.create_task(loop_until_cancelled())
    for _ in range(3):  # let it reach its wait
        await asyncio.sleep(0)
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert passes == 0
