"""The mirrored Flux and Argo CD objects through the reactor's API and around it (docs/cd.md):
shown with their source, never deployed, moved or reported through the API; readiness
waits for their first list; one paused for an outage whose cluster leaves the store is
resumed; and a replica that does not hold the Lease writes nothing until it takes it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.cli.status import render_status
from fleetwatch.common import metricnames
from fleetwatch.standin.management import ManagementCluster
from reactor.app import create_app
from reactor.cd.lease import LeaderElection
from reactor.cd.settings import CdSettings
from reactor.context import ReactorSettings
from tests.helpers.reactor_cd import (
    C1_PAUSED,
    FLEET,
    Start,
    add_clusters,
    c1_offline,
    c1_paused,
    c1_resumed,
    cd_settings,
    patches,
    state,
)
from tests.helpers.reactor_helpers import notify, postgres_url, until
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert

pytestmark = pytest.mark.live

KS_APPS = "flux:Kustomization/flux-system/apps"
GUESTBOOK = "argocd:Application/argocd/guestbook"


async def test_each_apps_source_is_shown_and_a_mirrored_app_is_not_the_apis_to_change(
    start: Start,
) -> None:
    client = await start()
    assert (await client.post("/apps", json={"name": "web-api", "cluster": "c1"})).status == 201

    detail = await (await client.get("/clusters/c1")).json()
    shown = {a["name"]: (a["source"], a["status"]) for a in detail["apps"]}
    assert shown == {
        KS_APPS: ("flux", "DEPLOYED"),
        "flux:Kustomization/flux-system/held": ("flux", "DEPLOYED"),
        "flux:Kustomization/flux-system/manual": ("flux", "DEPLOYED"),
        "flux:HelmRelease/flux-system/podinfo": ("flux", "DEPLOYED"),
        GUESTBOOK: ("argocd", "DEPLOYED"),
        "argocd:Application/argocd/web": ("argocd", "DEPLOYED"),
        "web-api": ("api", "PENDING"),
    }
    assert list(shown) == sorted(shown)  # by name
    assert detail["outages"] == [] and detail["status"] == "ONLINE"

    # Flux and Argo CD deploy these, to the cluster their object names: 409, nothing changed.
    for name, tool in ((KS_APPS, "Flux"), (GUESTBOOK, "Argo CD")):
        for method, path, body in (
            ("POST", "/deployments", {"app": name, "cluster": "c2"}),
            ("POST", "/deployments", {"app": name, "cluster": "c1"}),
            ("PATCH", f"/apps/{name}", {"cluster": "c2"}),
            ("PATCH", f"/apps/{name}", {"status": "DEGRADED", "reason": "broken"}),
            ("PATCH", f"/apps/{name}", {"status": "DEPLOYED"}),
        ):
            resp = await client.request(method, path, json=body)
            assert resp.status == 409, (method, path, body)
            message = (await resp.json())["error"]
            assert f"managed by {tool}" in message and name in message, message
        app = await (await client.get(f"/apps/{name}")).json()
        assert (app["cluster"], app["status"], app["reason"]) == ("c1", "DEPLOYED", None)
    # The API's own apps are deployed as ever, and the answer names their source.
    resp = await client.post("/deployments", json={"app": "web-api", "cluster": "c1"})
    assert resp.status == 201 and (await resp.json())["source"] == "api"

    # fleetwatch status: SOURCE and PAUSED columns for the apps; "held" is suspended by
    # hand (spec.suspend, no mark): DEPLOYED in the store, never shown as simply that.
    clusters = await (await client.get("/clusters")).json()
    apps = await (await client.get("/apps")).json()
    table = render_status(clusters, apps, datetime.now(UTC)).splitlines()
    header = table.index("") + 1
    assert table[header].split() == ["APP", "CLUSTER", "STATUS", "PAUSED", "SOURCE", "REASON"]
    rows = {line.split()[0]: line.split()[1:] for line in table[header + 1 :]}
    assert rows[KS_APPS] == ["c1", "DEPLOYED", "-", "flux"]
    assert rows[GUESTBOOK] == ["c1", "DEPLOYED", "-", "argocd"]
    assert rows["web-api"] == ["c1", "DEPLOYED", "-", "api"]
    assert rows["flux:Kustomization/flux-system/held"] == ["c1", "DEPLOYED", "person", "flux"]
    held = await (await client.get("/apps/flux:Kustomization/flux-system/held")).json()
    assert held["paused"] == {"by": "person"}
    assert (await (await client.get(f"/apps/{KS_APPS}")).json())["paused"] is None


async def started(
    aiohttp_client: Any, db_path: Path, cd: CdSettings, registry: CollectorRegistry | None = None
) -> Any:
    """A reactor with c1 and c2 (as discovery names them), both ONLINE; nothing awaited."""
    settings = ReactorSettings(db_path=db_path, db_url=postgres_url(db_path))
    client = await aiohttp_client(create_app(settings, registry=registry, cd=cd))
    await add_clusters(client)
    await notify(client, alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
    return client


async def test_ready_waits_for_the_first_list_of_the_cd_objects(
    mgmt: ManagementCluster,
    aiohttp_client: Any,
    db_path: Path,
) -> None:
    mgmt.seed(FLEET)
    mgmt.arm_fault(kind="hang", verb="list", resource="kustomizations.kustomize.toolkit.fluxcd.io")
    client = await started(aiohttp_client, db_path, cd_settings(str(mgmt.kubeconfig)))
    resp = await client.get("/-/ready")
    assert resp.status == 503 and resp.headers["Retry-After"] == "1"
    assert "first list of the Flux and Argo CD objects" in await resp.text()
    assert (await client.get("/-/healthy")).status == 200
    assert (await client.get("/clusters")).status == 200  # the API serves meanwhile
    mgmt.clear_faults()  # the hung list fails, the informer lists again

    async def ready() -> bool:
        return (await client.get("/-/ready")).status == 200

    await until(ready)


async def test_an_object_paused_for_an_outage_is_resumed_when_its_cluster_leaves_the_store(
    start: Start,
    mgmt: ManagementCluster,
) -> None:
    client, registry = await c1_offline(start, mgmt)
    await until(lambda: c1_paused(mgmt))
    mark = state(mgmt, "apps")[1]

    deleted_at = time.monotonic()
    resp = await client.delete("/clusters/c1", params={"force": "true"})
    assert resp.status == 200 and (await resp.json())["apps_deleted"] == 6
    await until(lambda: c1_resumed(mgmt))
    # Only after a resync interval without a cluster (the grace period).
    assert time.monotonic() - deleted_at >= 1.0
    assert state(mgmt, "held") == (True, None)  # a person's pause: never fleetwatch's to undo
    assert state(mgmt, "other") == (False, None)  # c2's, untouched
    orphans = metricnames.total(metricnames.REACTOR_CD_ORPHANS_RESUMED)
    # Counted when each patch's answer is back: a moment after the stand-in shows it.
    await until(lambda: registry.get_sample_value(orphans) == len(C1_PAUSED))
    # Each paused once and resumed once.
    assert patches(mgmt) == {
        "patch kustomizations.kustomize.toolkit.fluxcd.io": 4,
        "patch helmreleases.helm.toolkit.fluxcd.io": 2,
        "patch applications.argoproj.io": 4,
    }
    assert mark is not None


async def test_a_replica_without_the_lease_writes_nothing_until_it_takes_it(
    mgmt: ManagementCluster,
    aiohttp_client: Any,
    db_path: Path,
) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "fleetwatch-reactor-cd", "namespace": "default"},
        "spec": {"holderIdentity": "reactor-elsewhere", "leaseDurationSeconds": 3600},
    }
    mgmt.seed([*FLEET, lease])
    registry = CollectorRegistry()
    election = LeaderElection(namespace="default", lease_duration_s=3)
    cd = cd_settings(str(mgmt.kubeconfig), resync_interval_s=1.0, leader_election=election)
    client = await started(aiohttp_client, db_path, cd, registry)

    async def ready() -> bool:
        return (await client.get("/-/ready")).status == 200

    await until(ready)  # listed: ready, though it does not act
    await notify(client, alert(OFFLINE, "c1", 5))
    reads = "get leases.coordination.k8s.io"
    seen = mgmt.counts()[reads]
    await until(lambda: mgmt.counts()[reads] >= seen + 3)  # it tried, three times
    assert await (await client.get("/apps")).json() == []  # no mirror written
    assert patches(mgmt) == {}
    assert registry.get_sample_value(metricnames.REACTOR_CD_LEADER) == 0

    # The holder gives it up: this replica takes it, and its first pass is a full resync:
    # the objects are mirrored into c1's open outage, and paused.
    lease["spec"] = {"holderIdentity": "", "leaseDurationSeconds": 1}
    mgmt.seed([lease])
    await until(lambda: c1_paused(mgmt))
    assert registry.get_sample_value(metricnames.REACTOR_CD_LEADER) == 1
    transitions = metricnames.total(metricnames.REACTOR_CD_LEADER_TRANSITIONS)
    assert registry.get_sample_value(transitions) == 1
    apps = {a["name"]: a["status"] for a in await (await client.get("/apps")).json()}
    assert apps[KS_APPS] == "DEGRADED" and len(apps) == 8
