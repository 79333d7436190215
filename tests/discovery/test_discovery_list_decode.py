"""A large list page is decoded off the event loop, and one item at a time.

A relist of six kinds brings pages of 500 objects at once, each 10-24 ms of ``json.loads``
(issue 34, bench/RESULTS.md round 14). ``KubeApi.list`` decodes a large one in a worker
thread item by item, so the loop gets the interpreter between two items: a ticker task on
the loop keeps turning while a page that ``json.loads`` takes a long time over is decoded.
``json.loads`` in a thread would not do (the C decoder keeps the interpreter until done),
nor on the loop (the old code): the ticker's longest wait would be the whole decode.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from aiohttp import web

from fleetwatch.kube.kubeapi import KubeApi, KubeApiError, decode_list
from fleetwatch.kube.kubeauth import ApiCredentials


def secret(i: int) -> dict[str, Any]:
    """An object with many small fields: what makes ``json.loads`` slow per byte."""
    return {
        "metadata": {
            "name": f"cluster-{i}",
            "namespace": "argocd",
            "uid": f"{i:036d}",
            "resourceVersion": str(i),
            "labels": {f"label-{j}": f"value-{j}" for j in range(10)},
            "annotations": {f"note-{j}": "x" * 30 for j in range(10)},
        },
        "data": {f"key-{j}": "dmFsdWU=" for j in range(10)},
    }


def test_decode_list_is_json_loads() -> None:
    for body in (
        b"{}",
        b' {\n"items" : [ ] } ',
        b'{"kind":"SecretList","items":[{"a":[1]}, 2 ,"x"],"metadata":{"items":[3]}}',
        b'{"items":{"not":"a list"},"a":1}',
        b'{"items":[1],"items":[2,3]}',
        b"[1, 2]",
    ):
        assert decode_list(body) == json.loads(body), body
    for bad in (b"", b"{", b'{"items":[1,]}', b'{"items":[1}', b'{"a":1} x', b"{1:2}", b"\xff"):
        with pytest.raises(ValueError):
            decode_list(bad)


async def serve(body: bytes) -> tuple[web.AppRunner, str]:
    """``body`` at /api/v1/secrets, and the same cut short at /api/v1/broken."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def broken(request: web.Request) -> web.Response:
        return web.Response(body=body[:-2], content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/secrets", page)
    app.router.add_get("/api/v1/broken", broken)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


@pytest.mark.live
async def test_a_large_page_is_decoded_while_the_loop_turns() -> None:
    page = {"kind": "SecretList", "metadata": {"resourceVersion": "9"}}
    page["items"] = [secret(i) for i in range(10_000)]
    body = json.dumps(page).encode()
    decode_s = min(_timed(lambda: json.loads(body)) for _ in range(3))
    runner, server = await serve(body)
    longest = 0.0
    listed = asyncio.Event()

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not listed.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    waits: list[float] = []
    try:
        async with KubeApi(ApiCredentials(server=server, origin="test")) as api:
            # The best of three lists: a busy machine can stop the process for a while at
            # any time; the old code waited the whole decode every time.
            for _ in range(3):
                listed.clear()
                longest = 0.0
                ticking = asyncio.create_task(ticker())
                data = await api.list("/api/v1/secrets", {"limit": "500"})
                listed.set()
                await ticking
                waits.append(longest)
            with pytest.raises(KubeApiError, match="not JSON"):
                await api.list("/api/v1/broken", {})
    finally:
        await runner.cleanup()
    assert data == page
    # The ticker waited at most half of one whole decode (the old code: all of it).
    assert min(waits) < decode_s / 2, (waits, decode_s)


def _timed(work: Any) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start
