"""The Secrets' list+watch against a management API that fails every watch, live.

Each hostile mode (``discovery_hostile.HOSTILE``: 410 as an ERROR event or as the HTTP
status, other ERROR events, watches closed at once with no event, a line that is not JSON,
500 on every request) armed on the stand-in before the informer starts, at client-go's
pace (``InformerSettings()``): over a few seconds the reflector sends at most about two
requests a second and is backing off, and the rest of the process does not notice (a
ticker's lateness, the CPU share). Before issue 31 the same 15 s saw thousands of lists.
The schedule further on (one round per 30-60 s) is walked on a virtual clock in
``test_discovery_backoff.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleetwatch.discovery.secretwatch import WatchSpec
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin.management import ManagementCluster, ManagementSettings
from tests.helpers.discovery_hostile import HOSTILE, most_requests, observe, requests
from tests.helpers.discovery_informer import argocd_secret, running

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
async def test_a_hostile_api_gets_about_two_requests_a_second_and_nothing_else_slows(
    mgmt: ManagementCluster, mode: str
) -> None:
    mgmt.arm_fault(resource="secrets", **HOSTILE[mode])
    async with running(mgmt, [SPEC], settings=InformerSettings()) as informer:
        seen = await observe()
        sent = requests(mgmt.counts(), "secrets")
        reflector = informer.reflectors[0]
        assert 2 <= sent <= most_requests(seen.seconds), (mode, mgmt.counts())
        assert reflector.backoff.steps >= 2  # failing, and waiting longer each time
        if mode != "500":
            assert {"cluster-argo-a", "cluster-argo-b"} <= {
                o["metadata"]["name"] for o in informer.objects().values()
            }
    assert seen.cpu_share < 0.25, seen.cpu_share
    assert seen.lag_p90 < 0.1, seen.lag_p90
