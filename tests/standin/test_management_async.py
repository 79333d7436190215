"""The management cluster on the test's own event loop, watched with aiohttp.

fleetwatch's own watch client is asyncio code; this is the shape of its tests: the
server in-process (``ManagementCluster``), a real TLS client, no threads.
"""

from __future__ import annotations

import json

import aiohttp
import pytest

from fleetwatch.standin.management import ManagementCluster
from tests.helpers.standin_management import capi_secret

pytestmark = pytest.mark.live


async def test_an_asyncio_client_lists_then_watches_from_the_list_version(
    mgmt: ManagementCluster,
) -> None:
    mgmt.seed([capi_secret("edge-1", "capi-edge")])
    headers = {"Authorization": f"Bearer {mgmt.token}"}
    ssl_context = mgmt.certs.client_context(with_cert=False)
    url = f"{mgmt.url}/api/v1/secrets"
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        async with session.get(url, ssl=ssl_context) as listed:
            body = await listed.json()
        assert [i["metadata"]["name"] for i in body["items"]] == ["edge-1-kubeconfig"]
        revision = body["metadata"]["resourceVersion"]
        params = {
            "watch": "1",
            "resourceVersion": revision,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "5",
        }
        async with session.get(url, params=params, ssl=ssl_context) as stream:
            mgmt.seed([capi_secret("edge-2", "capi-edge")])
            first = json.loads(await stream.content.readline())
            assert (first["type"], first["object"]["metadata"]["name"]) == (
                "ADDED",
                "edge-2-kubeconfig",
            )
            assert int(first["object"]["metadata"]["resourceVersion"]) == int(revision) + 1
            bookmark = json.loads(await stream.content.readline())
            assert bookmark["type"] == "BOOKMARK"
            assert bookmark["object"]["metadata"]["resourceVersion"] == str(int(revision) + 1)
            mgmt.close_watches()
            assert await stream.content.read() == b""
