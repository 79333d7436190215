"""The reactor writes from whole lists of the management cluster's Secrets only.

The case the benchmark's reactor showed at every start (bench/RESULTS.md): the Cluster
API Secret of ``c1`` is listed before its Argo CD cluster Secret (three watches, each
listing at its own pace). Discovery upserting that half list wrote ``c1``'s reference to
the Cluster API Secret, then back to Argo CD's; the CD mirror resolving against it made an
Application naming ``c1`` "not mirrored: Argo CD knows no cluster Secret named c1" and, on
a restart, deleted its row. Here discovery holds its first list back until it is whole,
and the CD actuator waits for it: the row stays, with its id, and no warning is logged.
Not live: the store is SQLite in a temporary file, the management API a seam that is
never called (nothing is to be patched).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.discovery.secrets import SecretShape
from reactor.apidiscovery import ApiDiscovery
from reactor.cd.actuator import CdActuator
from reactor.cd.metrics import CdMetrics
from reactor.cd.mirror import mirror_row, plan
from reactor.cd.objects import read_object
from reactor.cd.settings import CdSettings
from reactor.cd.storeops import mirrored_apps, read_mirror
from reactor.cd.targets import ClusterIndex
from reactor.secretfleet import FleetDiff, SlimCluster
from reactor.service import Service
from reactor.store.sqlite import SQLiteStore
from tests.helpers.reactor_cd_seams import InlineRunner, NoPatches
from tests.helpers.reactor_helpers import until
from tests.helpers.standin_management import application

CAPI_REF = "secret://default/c1-kubeconfig"
ARGOCD_REF = "secret://argocd/cluster-c1"
APP = "argocd:Application/argocd/web"
CAPI = SecretShape("cluster-api", frozenset({"value"}))
ARGOCD = SecretShape("argocd", frozenset({"name", "server", "config"}))
#: discovery half way through its first list: the Cluster API Secret read, not Argo CD's
HALF = ({}, {CAPI_REF: CAPI})
#: the whole fleet: Argo CD's Secret of c1 read too, an alias of the cluster (same server)
WHOLE = ({ARGOCD_REF: "c1"}, {CAPI_REF: CAPI, ARGOCD_REF: ARGOCD})


class Objects:
    """Our seam for the informer: one Application naming ``c1``, listed."""

    synced = True
    generation = 0

    def objects(self) -> dict[str, dict[str, Any]]:
        listed = application("web", "c1")
        listed["metadata"] |= {"uid": "u-web", "resourceVersion": "7"}
        return {"u-web": listed}


class Discovery:
    """Our seam for ``reactor.apidiscovery.ApiDiscovery``: what it published, and whether
    its first list is done."""

    def __init__(self, found: Any, listed: bool) -> None:
        self.found, self.listed = found, listed


def actuator(service: Service, discovery: Discovery, wake: asyncio.Event) -> CdActuator:
    return CdActuator(
        InlineRunner(service),
        Objects(),
        NoPatches(),
        CdSettings(argocd=True, leader_election=None),
        CdMetrics(CollectorRegistry()),
        wake,
        discovered=lambda: discovery.found if discovery.listed else None,
    )


async def test_a_restart_mirrors_against_the_whole_fleet_not_half_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = Service(SQLiteStore(tmp_path / "fleetwatch.db"))
    service.add_cluster("c1", "https://c1.test:6443", CAPI_REF)
    # The run before: the whole fleet listed, the Application mirrored.
    await actuator(service, Discovery(WHOLE, listed=True), asyncio.Event()).run_pass(full=True)
    (before,) = mirrored_apps(service)
    assert before.name == APP

    # Why the wait: the half fleet's plan would delete the row.
    obj = read_object(Objects().objects()["u-web"])
    clusters, _ = read_mirror(service)
    half = plan({APP: obj}, ClusterIndex.of(clusters, *HALF), {APP: mirror_row(before)})
    assert half.deletes == [before.id]
    assert "Argo CD knows no cluster Secret named 'c1'" in half.unresolved[APP]

    # The restart: discovery still listing, the objects listed.
    caplog.set_level(logging.INFO, logger="reactor.cd.actuator")
    discovery, wake = Discovery(HALF, listed=False), asyncio.Event()
    cd = actuator(service, discovery, wake)
    task = asyncio.create_task(cd.run())
    try:
        await until(lambda: "waiting for the management cluster's Secrets" in caplog.text, 5.0)
        wake.set()  # a wake-up (an outage moved) while the Secrets are still listing
        await asyncio.sleep(0.05)
        assert cd.ledger.passes == 0
        assert mirrored_apps(service) == [before]

        discovery.found, discovery.listed = WHOLE, True
        wake.set()  # what ApiDiscovery's first upsert round does (Backend.changed)
        await until(lambda: cd.ledger.passes >= 1, 5.0, "the first pass")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert mirrored_apps(service) == [before]  # the same row: never deleted, never moved
    assert "not mirrored" not in caplog.text
    assert cd.metrics.unresolved._value.get() == 0


def test_without_secrets_read_through_the_api_nothing_is_waited_for(tmp_path: Path) -> None:
    """A reactor whose clusters come from files and ``POST /clusters`` only: the store
    alone is the fleet, listed from the start."""
    cd = CdActuator(
        InlineRunner(Service(SQLiteStore(tmp_path / "fleetwatch.db"))),
        Objects(),
        NoPatches(),
        CdSettings(argocd=True, leader_election=None),
        CdMetrics(CollectorRegistry()),
        asyncio.Event(),
    )
    assert cd.discovered() is not None


class Store:
    """Our seam for ``reactor.context.Backend``: upserts counted, listeners told; every
    cluster found as it is (a restart: nothing to add or update)."""

    def __init__(self) -> None:
        self.upserts = 0
        self.told = 0

    async def run(self, operation: Any) -> tuple[int, int]:
        self.upserts += 1
        return 0, 0

    def changed(self) -> None:
        self.told += 1


async def test_discovery_writes_its_first_list_whole_and_then_tells_the_mirror() -> None:
    """Half a list is held back (nothing upserted, nothing published); the whole list is
    upserted, and rings the mirror's wake-up event even when the store had every cluster
    as found (a restart), so the actuator waiting for it runs its first pass."""
    discovery = ApiDiscovery(source=None)  # type: ignore[arg-type]  # only take/settle run
    store = Store()
    c1 = SlimCluster("c1", "https://c1.test:6443", CAPI_REF, None)
    half = FleetDiff(full=True, clusters={"c1": c1}, shapes={CAPI_REF: CAPI})
    assert discovery.take(half) is None  # the Cluster API Secret listed, not Argo CD's
    assert (discovery.listed, discovery.fleet.clusters) == (False, {})

    c1_argocd = SlimCluster("c1", "https://c1.test:6443", ARGOCD_REF, None)
    rest = FleetDiff(
        synced=True,
        clusters={"c1": c1_argocd},
        aliases={CAPI_REF: "c1"},
        shapes={ARGOCD_REF: ARGOCD},
    )
    fleet = discovery.take(rest)
    assert fleet is not None
    await discovery.settle(store, fleet, rest)  # type: ignore[arg-type]
    assert discovery.listed
    assert discovery.fleet.clusters["c1"].ref == ARGOCD_REF  # the whole list's winner
    assert (store.upserts, store.told) == (1, 1)
