"""A list's pages paced: after each page but the last, a pause of ``list_pause`` times what
that page took, and (``transform_off_loop``) the page's transforms in a worker thread (the
reactor's informers: ``fleetwatch.kube.informer.BESIDE_REQUESTS``). The clock and the sleep
are the reflector's injected ones: no time passes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import pytest

from fleetwatch.discovery.secretwatch import WatchSpec
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.kube.reflector import Reflector

SPEC = WatchSpec("argocd", "argocd.argoproj.io/secret-type=cluster")
PAGES = 3
PAGE_S = 0.02  #: what each page takes on the fake clock


class PagedApi:
    """``PAGES`` pages of two Secrets, each advancing the clock by ``PAGE_S``."""

    def __init__(self) -> None:
        self.now = 100.0
        self.requests: list[float] = []  #: the clock at each page's request

    def clock(self) -> float:
        return self.now

    async def list(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        self.requests.append(self.now)
        page = int(params.get("continue") or 0)
        self.now += PAGE_S
        items = [secret(f"u{page}-{i}") for i in range(2)]
        meta: dict[str, Any] = {"resourceVersion": "7"}
        if page + 1 < PAGES:
            meta["continue"] = str(page + 1)
        return {"items": items, "metadata": meta}

    async def watch(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 (the Api protocol's)
    ) -> AsyncGenerator[dict[str, Any], None]:
        await asyncio.Event().wait()
        yield {}


def secret(uid: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": "7"}, "data": {}}


@pytest.mark.parametrize("pause", [0.0, 3.0])
async def test_each_page_but_the_last_is_followed_by_a_pause_in_proportion(pause: float) -> None:
    api = PagedApi()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        api.now += seconds

    reflector = Reflector(
        api, SPEC, InformerSettings(list_pause=pause), clock=api.clock, sleep=sleep
    )
    await reflector._list()
    assert len(reflector.store) == 2 * PAGES and reflector.synced
    assert slept == pytest.approx([pause * PAGE_S] * (PAGES - 1) if pause else [])
    gaps = [b - a for a, b in zip(api.requests, api.requests[1:], strict=False)]
    assert gaps == pytest.approx([PAGE_S * (1 + pause)] * (PAGES - 1))


@pytest.mark.parametrize("off_loop", [False, True])
async def test_a_page_is_transformed_alike_on_the_loop_or_off_it(off_loop: bool) -> None:
    api = PagedApi()
    threads: set[str] = set()

    def transform(obj: dict[str, Any]) -> str:
        threads.add(threading.current_thread().name)
        return str(obj["metadata"]["name"]).upper()

    async def sleep(seconds: float) -> None:
        pass

    settings = InformerSettings(transform_off_loop=off_loop)
    reflector = Reflector(api, SPEC, settings, transform=transform, clock=api.clock, sleep=sleep)
    await reflector._list()
    assert reflector.store == {f"u{p}-{i}": f"U{p}-{i}" for p in range(PAGES) for i in range(2)}
    assert (threading.main_thread().name in threads) is not off_loop
