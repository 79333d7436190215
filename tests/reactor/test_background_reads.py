"""The CD integration's reads run on a store thread and read handle of their own.

A CD pass reads every cluster and mirrored app (a few hundred milliseconds at 20,000
clusters); on the reader thread every request's read (``GET /clusters``, ``/-/ready``'s
ping, ``/metrics``' counts) queued behind it (bench/reactor_lists). Here that thread is
held while requests are asked: they are answered all the same. On SQLite and PostgreSQL
(``db_path``); live: the stand-in management cluster, and PostgreSQL for its half.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from reactor.context import BACKEND
from tests.helpers.reactor_cd import Start
from tests.helpers.reactor_helpers import MakeClient

pytestmark = pytest.mark.live


async def test_requests_are_answered_while_a_cd_read_holds_its_thread(start: Start) -> None:
    client = await start()
    backend = client.app[BACKEND]
    assert backend.background_reader is not None
    cd = backend.for_background()
    where = await cd.read(lambda service: threading.current_thread())
    assert where is backend.background_reads._thread  # not the requests' reader thread
    assert where is not await backend.read(lambda service: threading.current_thread())

    release = threading.Event()
    held = asyncio.ensure_future(cd.read(lambda service: release.wait(30)))
    try:
        for path in ("/clusters", "/-/ready", "/metrics"):
            resp = await asyncio.wait_for(client.get(path), 10)
            assert resp.status == 200, (path, await resp.text())
        assert not held.done()  # answered while the CD's read still held its thread
    finally:
        release.set()
    assert await held is True


async def test_without_the_cd_integration_no_handle_is_opened_for_it(
    make_client: MakeClient,
) -> None:
    """One connection fewer on PostgreSQL; a background read is then a read."""
    client = await make_client()
    backend = client.app[BACKEND]
    assert backend.background_reader is None
    assert await backend.for_background().read(lambda service: service.clusters()) == []
