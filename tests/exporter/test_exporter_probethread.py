"""Scrapes never wait for the probe side: it runs on an event loop of its own, in a thread.

The probe side's loop is held by a step that does not give it back (``after_cycle`` of the
first cycle waiting on an event: what a turn of a thousand TLS handshakes is, made long
on purpose); ``/metrics`` and ``/-/ready`` are still answered, from what the last cycle
rendered, while a callback posted to that loop has not run. Then the loop is let go and
the app stops cleanly. And :class:`exporter.loopthread.LoopThread`'s own contract: what
entering its context raises is raised by ``start``, and ``stop`` ends the context.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from exporter.loopthread import LoopThread
from exporter.server import create_app
from exporter.settings import ExporterSettings
from fleetwatch.common.metricnames import EXPORTER_CYCLES

ClientFactory = Callable[[web.Application], Any]

#: How long the held loop waits before it lets itself go (a test that fails must end).
HOLD_S = 60.0


async def _until(check: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {within}s"
        await asyncio.sleep(0.02)  # polling with a deadline, not synchronisation


async def test_a_scrape_is_answered_while_the_probe_loop_is_held(
    tmp_path: Path, aiohttp_client: ClientFactory
) -> None:
    held = threading.Event()
    release = threading.Event()
    probe_loop: list[asyncio.AbstractEventLoop] = []

    def hold_the_probe_loop() -> None:  # after the first cycle, on the probe side's loop
        if not probe_loop:
            probe_loop.append(asyncio.get_running_loop())
            held.set()
            release.wait(HOLD_S)  # nothing else runs on that loop meanwhile

    settings = ExporterSettings(
        kubeconfig_path=None, kubeconfig_dir=tmp_path, interval=60, timeout=1
    )
    client = await aiohttp_client(create_app(settings, after_cycle=hold_the_probe_loop))
    try:
        await _until(held.is_set, 30, "the first cycle")
        (loop,) = probe_loop
        assert loop is not asyncio.get_running_loop()
        ran = threading.Event()
        loop.call_soon_threadsafe(ran.set)  # runs once the probe loop turns again

        resp = await client.get("/metrics")
        assert resp.status == 200
        got = {
            s.name: s.value
            for f in text_string_to_metric_families(await resp.text())
            for s in f.samples
        }
        assert got[EXPORTER_CYCLES] == 1  # the first cycle's rendering, served as is
        assert (await client.get("/-/ready")).status == 200
        assert (await client.get("/sd/control-plane")).status == 200
        assert not ran.is_set(), "the probe loop turned: the scrape proved nothing"
    finally:
        release.set()
    await _until(ran.is_set, 30, "the probe loop turning again once let go")
    await client.close()  # stops the probe side; the fixture's close would too


def test_loopthread_raises_what_entering_raised_and_stops_its_context() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def failing() -> AsyncIterator[None]:
        raise PermissionError("no credentials")
        yield  # pragma: no cover

    @asynccontextmanager
    async def working() -> AsyncIterator[None]:
        events.append(f"entered in {threading.current_thread().name}")
        try:
            yield
        finally:
            events.append("exited")

    async def main() -> None:
        with pytest.raises(PermissionError, match="no credentials"):
            await LoopThread(failing, "failing side").start()
        side = LoopThread(working, "working side")
        await side.start()
        assert events == ["entered in working side"]
        assert await side.stop(10)
        assert await side.stop(10)  # stopped already: nothing to wait for

    asyncio.run(main())
    assert events == ["entered in working side", "exited"]
