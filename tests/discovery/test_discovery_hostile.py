"""The Secrets' list+watch against a management API that fails every watch, live.

Each hostile mode (``discovery_hostile.HOSTILE``: 410 as an ERROR event or as the HTTP
status, other ERROR events, watches closed at once with no event, a line that is not JSON,
500 on every request) armed on the stand-in before the informer starts, at client-go's
pace (``InformerSettings()``): over a window of a few seconds the reflector sends at most
about two requests a second, counted, and is backing off. Before issue 31 the same window
saw thousands of lists. The schedule further on (one round per 30-60 s) is walked on a
virtual clock in ``test_discovery_backoff.py``; how late the event loop runs meanwhile and
the process's CPU share are times, measured by ``bench/hostile_loop.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from fleetwatch.discovery.secretwatch import WatchSpec
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin.management import ManagementCluster, ManagementSettings
from tests.helpers.discovery_hostile import HOSTILE, WINDOW, most_requests, requests
from tests.helpers.discovery_informer import argocd_secret, running, until

pytestmark = pytest.mark.live

SPEC = WatchSpec("argocd", "argocd.argoproj.io/secret-type=cluster")


@pytest.fixture
def mgmt_settings() -> ManagementSettings:
    """The stand-in's own defaults: no early bookmarks to soften a hostile watch."""
    return ManagementSettings()


@pytest.fixture
def mgmt_seed() -> list[dict[str, Any]]:
    """What the shared ``mgmt`` (tests/helpers/standin_fixtures.py) holds at the start."""
    return [argocd_secret("argo-a"), argocd_secret("argo-b")]


@pytest.mark.parametrize("mode", list(HOSTILE))
async def test_a_hostile_api_gets_about_two_requests_a_second_and_is_backed_off_from(
    mgmt: ManagementCluster, mode: str
) -> None:
    mgmt.arm_fault(resource="secrets", **HOSTILE[mode])
    started = time.monotonic()
    async with running(mgmt, [SPEC], settings=InformerSettings()) as informer:
        reflector = informer.reflectors[0]
        await asyncio.sleep(WINDOW)  # the window the requests are counted over
        # failing, and waiting longer each time (two failed rounds: 0.8 s, then 1.6 s)
        await until(lambda: reflector.backoff.steps >= 2, 60, "two failed rounds")
        if mode != "500":
            names = {"cluster-argo-a", "cluster-argo-b"}
            await until(
                lambda: names <= {o["metadata"]["name"] for o in informer.objects().values()},
                60,
                "both Secrets listed",
            )
        sent = requests(mgmt.counts(), "secrets")
        elapsed = time.monotonic() - started
    assert 2 <= sent <= most_requests(elapsed), (mode, mgmt.counts(), elapsed)
