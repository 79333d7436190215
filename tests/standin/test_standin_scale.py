"""Many clusters in one fleet: they start, each answers on its own port."""

from __future__ import annotations

import asyncio
import resource
import ssl

import aiohttp
import pytest

from fleetwatch.standin import StandinFleet

pytestmark = pytest.mark.live


async def test_two_hundred_clusters_start_and_answer(
    fleet: StandinFleet, cert_ctx: ssl.SSLContext
) -> None:
    clusters = await fleet.add_clusters(200, prefix="scale")
    assert len({c.port for c in clusters}) == 200
    assert clusters[0].name == "scale-001" and clusters[-1].name == "scale-200"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard

    connector = aiohttp.TCPConnector(limit=50)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=10)
    ) as session:

        async def readyz(url: str) -> int:
            async with session.get(url + "/readyz", ssl=cert_ctx) as resp:
                return resp.status

        statuses = await asyncio.gather(*(readyz(c.url) for c in clusters))
    assert statuses == [200] * 200
    assert all(fleet.requests(c.name) == 1 for c in clusters)
