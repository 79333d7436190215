"""The CD watches (Kustomizations, HelmReleases) against a management API that fails every
watch, live: the reactor with ``--cd.flux`` at client-go's pace, each hostile mode of
``discovery_hostile.HOSTILE`` armed on both kinds before it starts. Each kind's reflector
sends at most about two requests a second (counted over the window) and backs off;
meanwhile the reactor answers every ``/metrics``. The list+watch is discovery's
(``fleetwatch.kube.reflector``): the schedule itself is walked on a virtual clock in
``tests/discovery/test_discovery_backoff.py``; how fast ``/metrics`` answers and how late
the event loop runs meanwhile are times, measured by ``bench/hostile_loop.py``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.standin.management import ManagementCluster
from reactor.app import create_app
from reactor.cd.settings import CdSettings
from reactor.context import ReactorSettings
from tests.helpers.discovery_hostile import (
    FLUX_KINDS,
    HOSTILE,
    KUSTOMIZATION,
    WINDOW,
    most_requests,
    requests,
)
from tests.helpers.discovery_informer import until

pytestmark = pytest.mark.live


@pytest.mark.parametrize("mode", list(HOSTILE))
async def test_cd_watches_back_off_from_a_hostile_api_and_the_reactor_still_answers(
    mgmt: ManagementCluster, aiohttp_client: Any, tmp_path: Path, mode: str
) -> None:
    mgmt.seed([KUSTOMIZATION])
    for kind in FLUX_KINDS:
        mgmt.arm_fault(resource=kind, **HOSTILE[mode])
    started = time.monotonic()
    settings = ReactorSettings(db_path=tmp_path / "fleetwatch.db")
    cd = CdSettings(flux=True, kubeconfig=str(mgmt.kubeconfig))  # client-go's pace
    client = await aiohttp_client(create_app(settings, cd=cd))

    answered = 0
    # /metrics through the window the requests are counted over, and five times at least
    while answered < 5 or time.monotonic() - started < WINDOW:
        response = await client.get("/metrics")
        assert response.status == 200
        await response.read()
        answered += 1
        await asyncio.sleep(0.2)
    # each kind failed twice at least (a list+watch round, a wait, another round)
    await until(lambda: all(requests(mgmt.counts(), k) >= 2 for k in FLUX_KINDS), 60, "two rounds")
    counts = mgmt.counts()
    elapsed = time.monotonic() - started
    for kind in FLUX_KINDS:
        assert 2 <= requests(counts, kind) <= most_requests(elapsed), (mode, counts, elapsed)
