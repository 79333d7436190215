"""Argo CD end to end: ``--cd.argocd.pause cluster-secret`` (one patch pauses a cluster,
one resumes it) and an ApplicationSet that reverts the pause. The reactor driven by its
webhook, Argo CD's cluster Secrets and Applications in the stand-in management cluster
(list, watch and patch over HTTPS, with a token granted only get, list, watch and patch
on Applications and Secrets, as deploy/'s components grant), the store SQLite or
PostgreSQL (docs/cd.md)."""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.common import metricnames
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import BY_API_KIND, SECRETS
from reactor.app import create_app
from reactor.cd.objects import MARK, SKIP_RECONCILE
from reactor.context import ReactorSettings
from tests.helpers.reactor_cd import (
    APP,
    SERVER,
    Start,
    add_clusters,
    application,
    c1_offline,
    cd_settings,
    patches,
)
from tests.helpers.reactor_helpers import mirrored, notify, postgres_url, until
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert

pytestmark = pytest.mark.live

#: What deploy/kubernetes/components/cd-argocd and cd-argocd-cluster-secret grant (create:
#: on Events only, checked below; the token here grants every verb on every resource).
VERBS = ["get", "list", "watch", "patch", "create"]
EVENTS = "events.events.k8s.io"
RESOURCES = ["applications.argoproj.io", "secrets", EVENTS]
CREDENTIALS = '{"bearerToken": "not-a-real-token"}'


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def cluster_secret(cluster: str, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"cluster-{cluster}",
        "namespace": "argocd",
        "labels": {"argocd.argoproj.io/secret-type": "cluster"},
    }
    if annotations:
        meta["annotations"] = annotations
    data = {"name": b64(cluster), "server": b64(SERVER[cluster]), "config": b64(CREDENTIALS)}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, "data": data}


FLEET = [
    cluster_secret("c1"),
    cluster_secret("c2"),
    application("guestbook", name="c1"),
    application("web", server=SERVER["c1"]),
    application("shop", name="c1"),
    application("away", name="c2"),
    # Paused by fleetwatch per Application before the mode changed, its outage over.
    application("earlier", {SKIP_RECONCILE: "true", MARK: "1"}, name="c2"),
]
C1_APPS = ("guestbook", "web", "shop")
APPLICATIONS = BY_API_KIND[(APP, "Application")]


@pytest.fixture
def start(mgmt: ManagementCluster, aiohttp_client: Any, db_path: Path, tmp_path: Path) -> Start:
    """A reactor with ``--cd.argocd --cd.argocd.pause=cluster-secret`` on ``mgmt``, through
    a token restricted to what the deploy/ components grant; c1 and c2 as discovery names
    them (their Argo CD cluster Secrets), both ONLINE, the fleet seeded."""

    async def started(registry: CollectorRegistry | None = None, **cd: Any) -> Any:
        token = mgmt.issue_token("fleetwatch-reactor", verbs=VERBS, resources=RESOURCES)
        kubeconfig = mgmt.write_kubeconfig(tmp_path / "reactor.kubeconfig", token=token)
        settings = ReactorSettings(db_path=db_path, db_url=postgres_url(db_path))
        cd_ = cd_settings(
            str(kubeconfig),
            **{
                "flux": False,
                "argocd_pause": "cluster-secret",
                "leader_election": None,  # one replica; the token grants no Lease
                **cd,
            },
        )
        client = await aiohttp_client(create_app(settings, registry=registry, cd=cd_))
        await add_clusters(client, lambda name: f"secret://argocd/cluster-{name}")
        mgmt.seed(FLEET)
        await notify(client, alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
        if not cd.get("dry_run"):  # a dry run writes no row: nothing to wait for
            await until(lambda: mirrored(client, lambda apps: len(apps) == 5))
        return client

    return started


def secret_of(mgmt: ManagementCluster, cluster: str) -> dict[str, Any]:
    found: dict[str, Any] = mgmt.state.store.get(SECRETS, "argocd", f"cluster-{cluster}")
    return found


def secret_state(mgmt: ManagementCluster, cluster: str) -> tuple[bool, str | None]:
    notes = secret_of(mgmt, cluster)["metadata"].get("annotations") or {}
    return notes.get(SKIP_RECONCILE) == "true", notes.get(MARK)


def requests(mgmt: ManagementCluster) -> dict[str, int]:
    """What the reactor asked, by verb and resource (the seeding is not a request)."""
    return dict(mgmt.counts())


async def person(mgmt: ManagementCluster, cluster: str, annotations: dict[str, Any]) -> None:
    """``kubectl annotate`` on a cluster Secret, over HTTPS (a merge patch of annotations)."""
    url = f"{mgmt.url}/api/v1/namespaces/argocd/secrets/cluster-{cluster}"
    headers = {
        "Authorization": f"Bearer {mgmt.token}",
        "Content-Type": "application/merge-patch+json",
    }
    body = {"metadata": {"annotations": annotations}}
    ssl_context = mgmt.certs.client_context(with_cert=False)
    async with (
        aiohttp.ClientSession() as session,
        session.patch(
            url,
            json=body,
            headers=headers,
            params={"fieldManager": "kubectl-annotate"},
            ssl=ssl_context,
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_one_patch_pauses_a_cluster_and_one_resumes_exactly_it(
    start: Start, mgmt: ManagementCluster
) -> None:
    registry = CollectorRegistry()
    client = await start(registry=registry)
    # The pause an earlier run left on an Application (per-Application mode) is finished.
    await until(lambda: mirrored(client, lambda a: a["argocd:Application/argocd/earlier"]))
    await until(lambda: patches(mgmt) == {"patch applications.argoproj.io": 1})
    earlier = mgmt.state.store.get(APPLICATIONS, "argocd", "earlier")
    assert not earlier["metadata"].get("annotations")
    data = secret_of(mgmt, "c1")["data"]

    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: secret_state(mgmt, "c1")[0])
    mark = secret_state(mgmt, "c1")[1]
    assert mark is not None and mark.isdigit()
    assert secret_state(mgmt, "c2") == (False, None)
    apps = {a["name"]: a for a in await (await client.get("/apps")).json()}
    assert {apps[f"argocd:Application/argocd/{n}"]["status"] for n in C1_APPS} == {"DEGRADED"}

    async def counted() -> bool:
        by_outage = sample(
            registry,
            metricnames.REACTOR_CD_OBJECTS,
            cluster="c1",
            source="argocd",
            state="paused_by_outage",
        )
        return by_outage == len(C1_APPS)

    await until(counted)
    assert sample(registry, metricnames.REACTOR_CD_CLUSTER_SECRETS, state="paused_by_outage") == 1
    assert sample(registry, metricnames.REACTOR_CD_CLUSTER_SECRETS, state="running") == 1
    assert (
        sample(
            registry, metricnames.REACTOR_CD_OBJECTS, cluster="c2", source="argocd", state="running"
        )
        == 2
    )

    await notify(client, alert(ONLINE, "c1", 10))
    await until(lambda: secret_state(mgmt, "c1") == (False, None))
    assert not secret_of(mgmt, "c1")["metadata"].get("annotations")
    assert secret_of(mgmt, "c1")["data"] == data  # the credentials untouched
    # One patch each way for the cluster, none of its three Applications patched.
    assert patches(mgmt) == {"patch secrets": 2, "patch applications.argoproj.io": 1}
    used = {key.split(" ")[0] for key in requests(mgmt)} - {"get"}  # discovery documents
    assert used <= set(VERBS)
    assert {key for key in requests(mgmt) if key.startswith("create ")} == {f"create {EVENTS}"}
    assert {key.split(" ", 1)[1] for key in requests(mgmt) if not key.startswith("get ")} <= set(
        RESOURCES
    )


async def resyncs(registry: CollectorRegistry, count: int = 1) -> None:
    """Until ``count`` full passes began and ended after now (the resync interval is 1 s)."""
    since = time.time()

    async def done() -> bool:
        last = sample(registry, metricnames.REACTOR_CD_LAST_RESYNC) or 0.0
        return last > since + count

    await until(done)


async def test_a_persons_pause_stands_and_a_persons_resume_is_their_choice(
    start: Start, mgmt: ManagementCluster
) -> None:
    registry = CollectorRegistry()
    client = await start(registry=registry, resync_interval_s=1.0)
    await person(mgmt, "c2", {SKIP_RECONCILE: "true"})  # paused by hand before any outage
    await notify(client, alert(OFFLINE, "c1", 5), alert(OFFLINE, "c2", 5))
    await until(lambda: secret_state(mgmt, "c1")[0])
    assert secret_state(mgmt, "c2") == (True, None)  # someone else's: left alone, unmarked

    # A person resumes c1 during its outage (their kubectl takes skip-reconcile off, our
    # mark stays): its Applications leave the outage, the mark goes, it stays running.
    await person(mgmt, "c1", {SKIP_RECONCILE: None})
    await until(lambda: secret_state(mgmt, "c1") == (False, None))
    await until(
        lambda: mirrored(
            client,
            lambda a: all(
                a[f"argocd:Application/argocd/{n}"]["status"] == "DEPLOYED" for n in C1_APPS
            ),
        )
    )
    patched = patches(mgmt)
    await resyncs(registry, 2)  # nothing is paused again against their choice
    assert patches(mgmt) == patched
    assert secret_state(mgmt, "c1") == (False, None)

    await notify(client, alert(ONLINE, "c1", 10), alert(ONLINE, "c2", 10))
    await resyncs(registry)
    assert secret_state(mgmt, "c2") == (True, None)  # never resumed by fleetwatch
    assert patches(mgmt) == patched


async def test_an_owner_that_drops_pause_and_mark_is_paused_again(
    start: Start, mgmt: ManagementCluster
) -> None:
    """A cluster Secret generated by a controller that replaces its annotations."""
    client = await start(resync_interval_s=1.0)
    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: secret_state(mgmt, "c1")[0])
    mark = secret_state(mgmt, "c1")[1]
    await person(mgmt, "c1", {SKIP_RECONCILE: None, MARK: None})
    await until(lambda: secret_state(mgmt, "c1") == (True, mark))


async def test_a_failed_patch_of_the_secret_is_retried(
    start: Start, mgmt: ManagementCluster
) -> None:
    _, registry = await c1_offline(start, mgmt, failing_patch_of="secrets")
    await until(lambda: secret_state(mgmt, "c1")[0])

    async def exported() -> bool:  # the pass that applied it exports at its end
        return sample(registry, metricnames.REACTOR_CD_PENDING) == 0

    await until(exported)
    failures = metricnames.total(metricnames.REACTOR_CD_FAILURES)
    assert sample(registry, failures, reason="server_error") == 1
    assert patches(mgmt)["patch secrets"] == 2


async def test_a_dry_run_patches_no_secret(start: Start, mgmt: ManagementCluster) -> None:
    registry = CollectorRegistry()
    client = await start(registry=registry, dry_run=True)
    await notify(client, alert(OFFLINE, "c1", 5))
    actions = metricnames.total(metricnames.REACTOR_CD_ACTIONS)

    async def counted() -> bool:
        return sample(registry, actions, action="pause", result="dry_run") == 1

    await until(counted)
    assert sample(registry, actions, action="resume", result="dry_run") == 1  # "earlier"
    assert mgmt.state.faults.writes() == 0
    assert await (await client.get("/apps")).json() == []  # nor any row of the store
    assert secret_state(mgmt, "c1") == (False, None)
    assert sample(registry, metricnames.REACTOR_CD_PENDING) == 2
    info = {"argocd_pause": "cluster-secret", "dry_run": "true"}
    assert sample(registry, metricnames.REACTOR_CD_INFO, **info) == 1


async def test_an_applicationset_reverting_the_pause_is_not_fought_faster_than_the_resync(
    start: Start, mgmt: ManagementCluster
) -> None:
    """An ApplicationSet without ``preservedFields`` rewrites its Application's annotations
    as soon as they change (its controller requeues on any annotation change of an
    Application it owns). fleetwatch pauses again, as its owner undid the pause, but at
    most once per resync interval: not as fast as the two watches go."""
    interval = 1.5
    client = await start(argocd_pause="application", resync_interval_s=interval)
    url = f"{mgmt.url}/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/guestbook"
    headers = {
        "Authorization": f"Bearer {mgmt.token}",
        "Content-Type": "application/merge-patch+json",
    }
    revert = {"metadata": {"annotations": {SKIP_RECONCILE: None, MARK: None}}}
    reverts = 0

    def guestbook_paused() -> bool:
        found = mgmt.state.store.get(APPLICATIONS, "argocd", "guestbook")
        notes = found["metadata"].get("annotations") or {}
        return notes.get(SKIP_RECONCILE) == "true"

    async def applicationset() -> None:
        nonlocal reverts
        ssl_context = mgmt.certs.client_context(with_cert=False)
        async with aiohttp.ClientSession() as session:
            while True:
                if guestbook_paused():
                    params = {"fieldManager": "argocd-applicationset-controller"}
                    async with session.patch(
                        url, json=revert, headers=headers, params=params, ssl=ssl_context
                    ) as resp:
                        assert resp.status == 200, await resp.text()
                    reverts += 1
                await asyncio.sleep(0.01)  # the controller's reaction time, not a wait

    controller = asyncio.create_task(applicationset())
    try:
        await notify(client, alert(OFFLINE, "c1", 5))
        await until(lambda: reverts >= 1)
        began, counted = time.monotonic(), reverts
        await until(lambda: reverts >= counted + 3, within=10 * interval)
        took = time.monotonic() - began
    finally:
        controller.cancel()
        await asyncio.gather(controller, return_exceptions=True)
    # Each revert answered by one pause, each pause at least a resync interval after the
    # one before: three more took three intervals (without the hold: 2 s in all, here).
    assert took > 3 * interval - 0.5, took
    ours = patches(mgmt)["patch applications.argoproj.io"] - reverts
    # c1's three Applications paused once, "earlier" resumed, and one pause per revert.
    assert ours - len(C1_APPS) - 1 <= reverts


async def test_a_cluster_secret_paused_for_an_outage_is_resumed_when_its_cluster_leaves(
    start: Start, mgmt: ManagementCluster
) -> None:
    """c1's Secret paused by its outage; c1 deleted from the store (forced: its apps go):
    no outage can end that pause, so after a resync interval the Secret is resumed and
    its mark dropped, counted as an orphan. c2's is not touched."""
    registry = CollectorRegistry()
    client = await start(registry=registry, resync_interval_s=1.0)
    await notify(client, alert(OFFLINE, "c1", 5))
    await until(lambda: secret_state(mgmt, "c1")[0])
    deleted_at = time.monotonic()
    resp = await client.delete("/clusters/c1", params={"force": "true"})
    assert resp.status == 200
    await until(lambda: secret_state(mgmt, "c1") == (False, None))
    assert time.monotonic() - deleted_at >= 1.0  # only after the grace period
    assert secret_state(mgmt, "c2") == (False, None)
    orphans = metricnames.total(metricnames.REACTOR_CD_ORPHANS_RESUMED)
    await until(lambda: registry.get_sample_value(orphans) == 1)
    # c1's Secret paused once and resumed once; "earlier" resumed at the start, as always
    assert patches(mgmt) == {"patch secrets": 2, "patch applications.argoproj.io": 1}
