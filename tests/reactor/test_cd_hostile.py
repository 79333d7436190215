"""The CD watches (Kustomizations, HelmReleases) against a management API that fails every
watch, live: the reactor with ``--cd.flux`` at client-go's pace, each hostile mode of
``discovery_hostile.HOSTILE`` armed on both kinds before it starts. Each kind's reflector
sends at most about two requests a second and backs off; meanwhile the reactor answers
``/metrics`` at once and its process stays nearly idle. The list+watch is discovery's
(``fleetwatch.kube.reflector``): the schedule itself is walked on a virtual clock in
``tests/discovery/test_discovery_backoff.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.standin.management import ManagementCluster
from reactor.app import create_app
from reactor.cd.settings import CdSettings
from reactor.context import ReactorSettings
from tests.helpers.discovery_hostile import HOSTILE, most_requests, observe, requests

pytestmark = pytest.mark.live

KINDS = ("kustomizations.kustomize.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io")
KUSTOMIZATION = {
    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
    "kind": "Kustomization",
    "metadata": {"name": "apps", "namespace": "flux-system"},
    "spec": {
        "interval": "10m",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        "kubeConfig": {"secretRef": {"name": "c1-kubeconfig"}},
    },
}


@pytest.mark.parametrize("mode", list(HOSTILE))
async def test_cd_watches_back_off_from_a_hostile_api_and_the_reactor_still_answers(
    mgmt: ManagementCluster, aiohttp_client: Any, tmp_path: Path, mode: str
) -> None:
    mgmt.seed([KUSTOMIZATION])
    for kind in KINDS:
        mgmt.arm_fault(resource=kind, **HOSTILE[mode])
    started = time.monotonic()
    settings = ReactorSettings(db_path=tmp_path / "fleetwatch.db")
    cd = CdSettings(flux=True, kubeconfig=str(mgmt.kubeconfig))  # client-go's pace
    client = await aiohttp_client(create_app(settings, cd=cd))

    async def metrics() -> None:
        response = await client.get("/metrics")
        assert response.status == 200
        await response.read()

    seen = await observe(probe=metrics)
    counts = mgmt.counts()
    elapsed = time.monotonic() - started
    for kind in KINDS:
        assert 2 <= requests(counts, kind) <= most_requests(elapsed), (mode, counts)
    assert len(seen.probe_seconds) >= 5
    assert max(seen.probe_seconds) < 1.0, seen.probe_seconds
    assert seen.lag_p90 < 0.1, seen.lag_p90
    assert seen.cpu_share < 0.3, seen.cpu_share
