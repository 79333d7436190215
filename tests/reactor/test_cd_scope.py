"""Which mirrored rows a replica may write (reactor.cd.scope) as its table, the mirror
planned over a replica's own rows, a dry run's preview, the rows of unwatched kinds
counted and named once per change, and the store's statements that write only the kinds
given (SQLite here, PostgreSQL too under ``[postgresql]``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reactor.cd.metrics import CdMetrics
from reactor.cd.mirror import mirror_row, plan, preview
from reactor.cd.objects import APPLICATION, HELMRELEASE, KUSTOMIZATION, CdObject, read_object
from reactor.cd.scope import OTHER_KIND, Scope, kind_of, prefix_of, scope_of
from reactor.cd.targets import ClusterIndex
from reactor.cd.unwatched import UnwatchedRows, count, split
from reactor.service import Service
from reactor.statemachine import CLUSTER_OFFLINE, AppStatus, Status
from reactor.store import KnownCluster, MirroredApp
from tests.helpers.reactor_helpers import open_store

FLUX_KINDS = (KUSTOMIZATION, HELMRELEASE)
ALL_KINDS = (KUSTOMIZATION, HELMRELEASE, APPLICATION)
KS = "flux:Kustomization/flux-system/apps"
HR = "flux:HelmRelease/flux-system/podinfo"
APP = "argocd:Application/argocd/guestbook"
NEWER = "flux:Bucket/flux-system/charts"  # a kind of a later version

SCOPES = [
    # (replica, the row, watched, dry run, scope): the docstring's table, row by row
    ("acting", KS, ALL_KINDS, False, Scope.OWN),
    ("acting", HR, FLUX_KINDS, False, Scope.OWN),
    ("acting", APP, ALL_KINDS, False, Scope.OWN),
    ("acting without --cd.argocd", APP, FLUX_KINDS, False, Scope.UNWATCHED),
    ("acting without --cd.flux", KS, (APPLICATION,), False, Scope.UNWATCHED),
    ("acting, a kind of a later version", NEWER, ALL_KINDS, False, Scope.UNWATCHED),
    ("dry run", KS, FLUX_KINDS, True, Scope.PREVIEW),
    ("dry run", APP, ALL_KINDS, True, Scope.PREVIEW),
    ("dry run without --cd.argocd", APP, FLUX_KINDS, True, Scope.UNWATCHED),
]  # fmt: skip


@pytest.mark.parametrize(("replica", "name", "watched", "dry_run", "scope"), SCOPES)
def test_scope_table(
    replica: str, name: str, watched: tuple[Any, ...], dry_run: bool, scope: Scope
) -> None:
    assert scope_of(name, watched, dry_run) is scope, replica


def test_a_rows_kind_is_read_from_its_name_and_bounded() -> None:
    assert [kind_of(n) for n in (KS, HR, APP, NEWER)] == [
        "Kustomization",
        "HelmRelease",
        "Application",
        OTHER_KIND,
    ]
    # A prefix is the whole "SOURCE:KIND/": a name that merely begins alike is another kind.
    assert kind_of("flux:KustomizationX/ns/a") == OTHER_KIND
    assert scope_of("flux:KustomizationX/ns/a", ALL_KINDS, False) is Scope.UNWATCHED


C1 = KnownCluster("c1", "https://c1.test:6443", "secret://flux-system/c1-kubeconfig", Status.ONLINE)
C1_DOWN = KnownCluster("c1", C1.endpoint, C1.kubeconfig_secret_ref, Status.OFFLINE, 9)


def row(
    id: int,
    name: str,
    status: AppStatus = AppStatus.DEPLOYED,
    outage: int | None = None,
    paused: bool = False,
    mark: str | None = None,
    cluster: KnownCluster = C1,
) -> MirroredApp:
    source = name.split(":", 1)[0]
    assert cluster.status is not None
    return MirroredApp(
        id, name, source, cluster.name, status, outage, cluster.status, cluster.outage_id,
        f"uid-{name}", paused, mark,
    )  # fmt: skip


def kustomization(name: str, uid: str, suspend: bool = False) -> CdObject:
    spec = {"kubeConfig": {"secretRef": {"name": "c1-kubeconfig"}}, "suspend": suspend}
    meta = {"name": name, "namespace": "flux-system", "uid": uid, "resourceVersion": "1"}
    body = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization"}
    found = read_object({**body, "metadata": meta, "spec": spec})
    assert isinstance(found, CdObject)
    return found


def test_a_replica_without_argocd_plans_nothing_for_the_argocd_rows() -> None:
    """The bug: planned over every row, a Flux-only replica deleted the Applications."""
    rows = [row(1, KS), row(2, APP, AppStatus.DEGRADED, 9, paused=True, mark="9")]
    objects = {KS: kustomization("apps", f"uid-{KS}")}
    index = ClusterIndex.of([C1])
    every = plan(objects, index, {r.name: mirror_row(r) for r in rows})
    assert every.deletes == [2]  # what the old plan over every row did
    mine, others = split(rows, FLUX_KINDS, dry_run=False)
    assert [r.name for r in others] == [APP]
    planned = plan(objects, index, {r.name: mirror_row(r) for r in mine})
    assert planned.writes == 0


def test_a_dry_run_previews_the_mirror_as_it_would_be_written() -> None:
    """Inserted on an OFFLINE cluster: DEGRADED in its outage, as the store would place
    it; a gone object's row leaves; what was seen is updated; nothing else changes."""
    rows = [row(1, KS), row(2, "flux:Kustomization/flux-system/gone")]
    objects = {
        KS: kustomization("apps", f"uid-{KS}", suspend=True),
        "flux:Kustomization/flux-system/late": kustomization("late", "uid-late"),
    }
    mirror = plan(objects, ClusterIndex.of([C1_DOWN]), {r.name: mirror_row(r) for r in rows})
    seen = preview(mirror, rows, [C1_DOWN])
    assert [(a.name, a.status, a.outage_id, a.paused, a.id < 0) for a in seen] == [
        (KS, AppStatus.DEPLOYED, None, True, False),  # seen paused; its place unchanged
        ("flux:Kustomization/flux-system/late", AppStatus.DEGRADED, 9, False, True),
    ]
    assert seen[1].cluster_status is Status.OFFLINE and seen[1].cluster_outage_id == 9


def test_unwatched_rows_are_counted_and_the_paused_named_once_per_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    metrics = CdMetrics(registry)
    unwatched = UnwatchedRows(FLUX_KINDS, False, metrics.set_unwatched)
    web = "argocd:Application/argocd/web"
    rows = [
        row(1, KS),
        row(2, APP, AppStatus.DEGRADED, 9, paused=True, mark="9"),
        row(3, web, paused=True),  # a person's pause: counted, not named
    ]
    caplog.set_level(logging.INFO, logger="reactor.cd.unwatched")
    for _ in range(3):  # three resyncs, one change
        assert [r.name for r in unwatched.mine(rows)] == [KS]
    named = [r.getMessage() for r in caplog.records if "nothing will resume them" in r.message]
    assert len(named) == 1 and APP in named[0] and web not in named[0], named
    name = "fleetwatch_reactor_cd_unwatched_objects"
    sample = registry.get_sample_value
    assert sample(name, {"kind": "Application", "state": "paused_by_outage"}) == 1
    assert sample(name, {"kind": "Application", "state": "paused"}) == 1
    assert sample(name, {"kind": "Application", "state": "running"}) == 0
    assert sample(name, {"kind": "Kustomization", "state": "running"}) is None  # watched
    # A person resumed it, and a replica that watches it again said so: the list changed.
    caplog.clear()
    unwatched.mine([row(1, KS), row(2, APP), row(3, web, paused=True)])
    assert [r.levelname for r in caplog.records if "pause any more" in r.message] == ["INFO"]
    assert count([row(2, APP)]) == {("Application", "running"): 1}


def test_the_stores_writes_change_only_rows_of_the_kinds_given(db_path: Path) -> None:
    """A plan that names a row of another kind (a bug) still leaves it: the statements
    check the kinds too."""
    store = open_store(db_path)
    service = Service(store)
    try:
        service.add_cluster("c1", C1.endpoint, C1.kubeconfig_secret_ref)
        service.add_cluster("c2", "https://c2.test:6443", "secret://flux-system/c2-kubeconfig")
        placed = (AppStatus.DEGRADED, CLUSTER_OFFLINE, None)
        with store.write() as tx:
            c1, c2 = (tx.clusters_named(["c1", "c2"])[n].id for n in ("c1", "c2"))
            for name in (KS, APP):
                assert tx.insert_mirrored(name, name.split(":")[0], c1, placed, ("u", True, "9"))
        with store.read() as tx:
            ids = {a.name: a.id for a in tx.mirrored_apps()}
        flux = [prefix_of(k) for k in FLUX_KINDS]
        deployed = (AppStatus.DEPLOYED, None, None)
        with store.write() as tx:
            tx.set_seen([(ids[APP], "other", False, None), (ids[KS], "u2", False, None)], flux)
            tx.move_mirrored(ids[APP], c2, deployed, flux)
            tx.delete_mirrored([ids[APP]], flux)
            tx.delete_mirrored([ids[APP], ids[KS]], [])  # no kind: nothing
        with store.read() as tx:
            found = {a.name: a for a in tx.mirrored_apps()}
        assert found[APP].uid == "u" and found[APP].paused and found[APP].mark == "9"
        assert (found[APP].cluster, found[APP].status) == ("c1", AppStatus.DEGRADED)
        assert (found[KS].uid, found[KS].paused, found[KS].mark) == ("u2", False, None)
        with store.write() as tx:
            tx.move_mirrored(ids[KS], c2, deployed, flux)
            tx.delete_mirrored([ids[KS]], [prefix_of(APPLICATION)])  # not its kind
        with store.read() as tx:
            assert {a.name: a.cluster for a in tx.mirrored_apps()} == {KS: "c2", APP: "c1"}
        with store.write() as tx:
            tx.delete_mirrored([ids[KS], ids[APP]], flux)
        with store.read() as tx:
            assert [a.name for a in tx.mirrored_apps()] == [APP]
    finally:
        store.close()
