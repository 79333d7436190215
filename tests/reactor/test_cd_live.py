"""The CD integration end to end: the reactor driven by its webhook, the objects in the
stand-in management cluster (list, watch and patch over HTTPS), the store SQLite or
PostgreSQL (docs/cd.md): pause on an outage, resume exactly those."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.cli.demo_cd import cluster_secret, flux_object
from fleetwatch.common import metricnames
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor.app import create_app
from reactor.cd.objects import MARK, REQUESTED_AT, SKIP_RECONCILE
from reactor.cd.settings import CdSettings
from reactor.context import ReactorSettings
from tests.helpers.reactor_cd import (
    C1_PAUSED,
    KS,
    OBJECTS,
    Start,
    c1_offline,
    c1_paused,
    c1_resumed,
    kustomization,
    obj,
    patches,
    state,
)
from tests.helpers.reactor_helpers import mirrored, notify, until
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert

pytestmark = pytest.mark.live

C3_KUBECONFIG = """\
clusters: [{name: c3, cluster: {server: "https://c3.test:6443"}}]
users: [{name: c3, user: {token: not-a-secret}}]
contexts: [{name: c3, context: {cluster: c3, user: c3}}]
current-context: c3
"""


async def send(
    mgmt: ManagementCluster, name: str, body: dict[str, Any], content_type: str, **params: str
) -> dict[str, Any]:
    """A write as a person or a controller makes it, over HTTPS."""
    seeded = OBJECTS[name]
    kind = BY_API_KIND[(seeded["apiVersion"], seeded["kind"])]
    ns = seeded["metadata"]["namespace"]
    url = f"{mgmt.url}/apis/{kind.group}/{kind.version}/namespaces/{ns}/{kind.plural}/{name}"
    headers = {"Authorization": f"Bearer {mgmt.token}", "Content-Type": content_type}
    ssl_context = mgmt.certs.client_context(with_cert=False)
    async with (
        aiohttp.ClientSession() as session,
        session.patch(url, json=body, headers=headers, params=params, ssl=ssl_context) as resp,
    ):
        assert resp.status == 200, await resp.text()
        answer: dict[str, Any] = await resp.json()
        return answer


async def test_an_outage_pauses_its_objects_and_its_end_resumes_exactly_those(
    start: Start, mgmt: ManagementCluster
) -> None:
    client = await start()
    apps = {a["name"]: a for a in await (await client.get("/apps")).json()}
    assert {(a["source"], a["cluster"], a["status"]) for a in apps.values()} == {
        ("flux", "c1", "DEPLOYED"),
        ("flux", "c2", "DEPLOYED"),
        ("argocd", "c1", "DEPLOYED"),
        ("argocd", "c2", "DEPLOYED"),
    }
    assert "flux:Kustomization/flux-system/local" not in apps
    assert apps["argocd:Application/argocd/web"]["cluster"] == "c1"  # by its server
    assert patches(mgmt) == {}

    await notify(client, alert(OFFLINE, "c1", 5))

    await until(lambda: c1_paused(mgmt))
    marks = {state(mgmt, n)[1] for n in C1_PAUSED}
    assert len(marks) == 1 and next(iter(marks)).isdigit()  # the outage's id, on all five
    assert state(mgmt, "held") == (True, None)  # a person's pause: left alone, unmarked
    assert state(mgmt, "other") == (False, None) and state(mgmt, "away") == (False, None)
    apps = {a["name"]: a for a in await (await client.get("/apps")).json()}
    assert apps["flux:Kustomization/flux-system/apps"]["status"] == "DEGRADED"

    # A person resumes one during the outage: their choice stands, the mark is dropped.
    await send(
        mgmt,
        "manual",
        {"spec": {"suspend": False}},
        "application/merge-patch+json",
        fieldManager="kubectl-patch",
    )
    await until(lambda: state(mgmt, "manual") == (False, None))
    await until(
        lambda: mirrored(
            client, lambda a: a["flux:Kustomization/flux-system/manual"]["status"] == "DEPLOYED"
        )
    )

    await notify(client, alert(ONLINE, "c1", 10))

    await until(lambda: c1_resumed(mgmt))
    assert state(mgmt, "held") == (True, None)  # never resumed by fleetwatch
    assert REQUESTED_AT in obj(mgmt, "apps")["metadata"]["annotations"]  # syncs at once
    assert not obj(mgmt, "guestbook")["metadata"].get("annotations")  # both removed
    assert state(mgmt, "other") == (False, None)
    # Each object patched exactly as often as needed: paused once, resumed once (manual:
    # paused, then only its mark dropped); no retry, no conflict.
    assert patches(mgmt) == {
        "patch kustomizations.kustomize.toolkit.fluxcd.io": 4 + 1,  # + the person's
        "patch helmreleases.helm.toolkit.fluxcd.io": 2,
        "patch applications.argoproj.io": 4,
    }
    apps = {a["name"]: a for a in await (await client.get("/apps")).json()}
    assert {a["status"] for a in apps.values()} == {"DEPLOYED"}


async def test_an_owner_that_undoes_the_pause_is_paused_again(
    start: Start, mgmt: ManagementCluster
) -> None:
    client = await start(resync_interval_s=1.0)
    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: bool(state(mgmt, "apps")[1] and state(mgmt, "guestbook")[1]))
    mark = state(mgmt, "apps")[1]
    # Flux's parent Kustomization: a forced server-side apply takes spec.suspend back
    # (our mark, a field it does not apply, stays).
    applied = {**OBJECTS["apps"], "spec": {**OBJECTS["apps"]["spec"], "suspend": False}}
    await send(
        mgmt,
        "apps",
        applied,
        "application/apply-patch+yaml",
        fieldManager="kustomize-controller",
        force="true",
    )
    # An ApplicationSet without preservedFields: its annotations replaced, both gone.
    await send(
        mgmt,
        "guestbook",
        {"metadata": {"annotations": {MARK: None, SKIP_RECONCILE: None}}},
        "application/merge-patch+json",
        fieldManager="argocd-applicationset-controller",
    )
    assert state(mgmt, "apps") == (False, mark) and state(mgmt, "guestbook") == (False, None)
    await until(lambda: state(mgmt, "apps") == (True, mark))
    await until(lambda: state(mgmt, "guestbook") == (True, mark))


async def test_a_failed_patch_is_retried_at_the_next_resync(
    start: Start, mgmt: ManagementCluster
) -> None:
    _, registry = await c1_offline(start, mgmt, failing_patch_of="applications.argoproj.io")
    await until(lambda: all(state(mgmt, n)[1] for n in C1_PAUSED))
    failures = registry.get_sample_value(
        metricnames.total(metricnames.REACTOR_CD_FAILURES), {"reason": "server_error"}
    )
    assert failures == 1
    assert patches(mgmt)["patch applications.argoproj.io"] == 3  # one failed, retried


async def test_a_dry_run_patches_nothing_and_counts_what_it_would_do(
    start: Start, mgmt: ManagementCluster
) -> None:
    registry = CollectorRegistry()
    client = await start(registry=registry, dry_run=True)
    await notify(client, alert(OFFLINE, "c1", 5))
    actions = metricnames.total(metricnames.REACTOR_CD_ACTIONS)

    async def counted() -> bool:
        would = registry.get_sample_value(actions, {"action": "pause", "result": "dry_run"})
        return would == len(C1_PAUSED)

    await until(counted)
    assert mgmt.state.faults.writes() == 0  # no write request reached the API (no Event)
    assert all(state(mgmt, n) == (False, None) for n in C1_PAUSED)
    # Decided on the mirror as it would be, which it never wrote: no row of the store.
    assert [a["name"] for a in await (await client.get("/apps")).json()] == []
    assert registry.get_sample_value(metricnames.REACTOR_CD_PENDING) == len(C1_PAUSED)


async def test_no_outage_no_pause(start: Start, mgmt: ManagementCluster) -> None:
    """The storm guard and silences: an OFFLINE that opens no outage (here: a cluster never
    seen ONLINE; an inhibited or silenced alert never even arrives) pauses nothing."""
    registry = CollectorRegistry()
    client = await start(registry=registry, online=False, resync_interval_s=1.0)
    notified = time.time()
    await notify(client, alert(OFFLINE, "c1", 5))

    async def resynced() -> bool:  # a full pass that began after the notification ended
        last = registry.get_sample_value(metricnames.REACTOR_CD_LAST_RESYNC) or 0.0
        return last > notified + 1.0

    await until(resynced)
    assert patches(mgmt) == {}
    assert all(state(mgmt, n) == (False, None) for n in C1_PAUSED)


async def discovering_c3(
    mgmt: ManagementCluster,
    aiohttp_client: Any,
    tmp_path: Path,
    debounce_s: float,
    key: str | None = None,
) -> Any:
    """Cluster API's Secret of c3 and a Kustomization through it (naming ``key``), and a
    reactor discovering clusters from the Secrets with ``--cd.flux``, once the
    Kustomization is mirrored."""
    mgmt.seed([cluster_secret("c3", "apiVersion: v1\nkind: Config\n" + C3_KUBECONFIG)])
    mgmt.seed([flux_object("Kustomization", "c3", "apps", key=key)])
    fast = InformerSettings(backoff_initial=0.05, backoff_max=0.5)
    settings = ReactorSettings(
        db_path=tmp_path / "fleetwatch.db",
        kubernetes=KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=fast),
        discovery_debounce_s=debounce_s,
    )
    cd = CdSettings(flux=True, kubeconfig=str(mgmt.kubeconfig), informer=fast)
    client = await aiohttp_client(create_app(settings, cd=cd))
    name = "flux:Kustomization/c3/apps"
    await until(lambda: mirrored(client, lambda apps: name in apps), within=10.0)
    return client


async def test_an_object_listed_before_discovery_found_its_cluster_is_mirrored_at_the_upsert(
    mgmt: ManagementCluster, aiohttp_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fresh store: the CD list is done before discovery's first list (held back by its
    debounce); the actuator waits for the Secrets instead of resolving against half a
    fleet (the object is never reported unresolved), and discovery's first upsert wakes
    it: the object is mirrored then, not at the resync a minute later."""
    caplog.set_level(logging.INFO)
    client = await discovering_c3(mgmt, aiohttp_client, tmp_path, debounce_s=1.0)
    name = "flux:Kustomization/c3/apps"
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("cd: waiting for the management cluster's Secrets") for m in said)
    assert not any("is not mirrored" in m for m in said)
    assert (await (await client.get(f"/apps/{name}")).json())["cluster"] == "c3"


@pytest.mark.parametrize(("argocd_too", "key"), [(True, None), (True, "value"), (False, "value")])
async def test_flux_objects_naming_a_cluster_api_secret_follow_its_outage(
    mgmt: ManagementCluster, aiohttp_client: Any, tmp_path: Path, argocd_too: bool, key: str | None
) -> None:
    """A Kustomization through Cluster API's Secret of c3, naming no key or ``key: value``
    as Cluster API users write it (issue 31): mirrored on c3, paused by c3's outage,
    resumed by its end. ``argocd_too``: the management cluster also runs Argo CD and holds
    its Secret of c3; discovery keeps Argo CD's (its namespace sorts first) and sets
    Cluster API's aside as a duplicate at the same server, which still names the cluster
    for the Kustomization."""
    argocd_secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "cluster-c3",
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
        },
        "stringData": {
            "name": "c3",
            "server": "https://c3.test:6443",
            "config": '{"bearerToken": "not-a-secret"}',
        },
    }
    if argocd_too:
        mgmt.seed([argocd_secret])
    client = await discovering_c3(mgmt, aiohttp_client, tmp_path, debounce_s=0.1, key=key)
    name = "flux:Kustomization/c3/apps"
    cluster = await (await client.get("/clusters/c3")).json()
    owner = "argocd/cluster-c3" if argocd_too else "c3/c3-kubeconfig"
    assert cluster["kubeconfig_secret_ref"] == f"secret://{owner}"
    assert (await (await client.get(f"/apps/{name}")).json())["cluster"] == "c3"
    await notify(client, alert(ONLINE, "c3", 0))
    await notify(client, alert(OFFLINE, "c3", 5))
    kustomizations = BY_API_KIND[(KS, "Kustomization")]

    def suspended() -> bool:
        found = mgmt.state.store.get(kustomizations, "c3", "apps")
        return found["spec"].get("suspend") is True

    await until(suspended, within=10.0, what="the Kustomization paused by c3's outage")
    await notify(client, alert(ONLINE, "c3", 10))
    await until(lambda: not suspended(), within=10.0, what="the Kustomization resumed")
    found = mgmt.state.store.get(kustomizations, "c3", "apps")
    assert MARK not in (found["metadata"].get("annotations") or {})


async def test_a_cluster_added_through_the_api_takes_its_objects_at_once(
    start: Start, mgmt: ManagementCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The objects naming a cluster the store lacks are unresolved; POST /clusters wakes the
    pass, which mirrors them then, not at the resync (60 s here; 15 s allowed for a loaded
    machine). One replica without the election: no poll of the store's clusters (that is
    for other replicas' changes)."""
    caplog.set_level(logging.INFO, logger="reactor.cd.actuator")
    client = await start(leader_election=None)
    mgmt.seed([kustomization("late", "c9")])
    name = "flux:Kustomization/flux-system/late"
    unresolved = f"cd: {name} is not mirrored"
    await until(
        lambda: any(r.getMessage().startswith(unresolved) for r in caplog.records),
        what="the object unresolved first",
    )
    body = {
        "name": "c9",
        "endpoint": "https://c9.test:6443",
        "kubeconfig_secret_ref": "secret://flux-system/c9-kubeconfig",
    }
    assert (await client.post("/clusters", json=body)).status == 201
    await until(lambda: mirrored(client, lambda apps: name in apps), within=15.0)
    assert (await (await client.get(f"/apps/{name}")).json())["cluster"] == "c9"
