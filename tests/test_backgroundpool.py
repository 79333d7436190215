"""Background work's pool: background work runs on threads of its own, so a request's work
handed to asyncio's executor never queues behind it; without a pool, as before."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from fleetwatch.common import backgroundpool, foreground
from fleetwatch.common.backgroundpool import BackgroundPool, in_background


@pytest.fixture
def pool() -> Iterator[BackgroundPool]:
    """A pool of two workers, installed for the test, then uninstalled and stopped."""
    made = BackgroundPool(workers=2)
    backgroundpool.install(made)
    yield made
    backgroundpool.install(None)
    made.shutdown()


def seen() -> tuple[str, bool]:
    """In the worker: its thread's name, whether it runs background work."""
    return threading.current_thread().name, foreground.background_here()


def test_without_a_pool_the_default_executor_runs_it_as_background_work() -> None:
    name, is_background = asyncio.run(in_background(seen))
    assert not name.startswith("fleetwatch-background")
    assert is_background
    assert not foreground.background_here()  # the caller's thread is not marked


def test_with_a_pool_its_threads_run_it(pool: BackgroundPool) -> None:
    name, is_background = asyncio.run(in_background(seen))
    assert name.startswith("fleetwatch-background")
    assert is_background
    assert asyncio.run(in_background(lambda a, b: a - b, 5, b=3)) == 2


def test_a_request_thread_does_not_queue_behind_background_work(pool: BackgroundPool) -> None:
    """Every worker of the pool busy: work handed to asyncio's executor (a webhook's
    decode) still runs at once."""
    release = threading.Event()
    started = threading.Semaphore(0)

    def hold() -> None:
        started.release()
        release.wait(30)

    async def scenario() -> str:
        held = [asyncio.ensure_future(in_background(hold)) for _ in range(2)]
        for _ in range(2):
            await asyncio.to_thread(started.acquire, True, 30)
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(lambda: threading.current_thread().name), 10
            )
        finally:
            release.set()
            await asyncio.gather(*held)

    assert not asyncio.run(scenario()).startswith("fleetwatch-background")


def test_errors_reach_the_caller(pool: BackgroundPool) -> None:
    def fail() -> None:
        raise ValueError("bad page")

    with pytest.raises(ValueError, match="bad page"):
        asyncio.run(in_background(fail))


def test_install_answers_the_one_before(pool: BackgroundPool) -> None:
    assert backgroundpool.install(None) is pool
    assert backgroundpool.install(pool) is None
