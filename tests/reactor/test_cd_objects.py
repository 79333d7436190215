"""Flux and Argo CD objects read (reactor.cd.objects), their clusters found
(reactor.cd.targets) and the store's mirror planned (reactor.cd.mirror): pure tables."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwatch.discovery.secrets import Kind, SecretShape
from reactor.cd.mirror import MirrorPlan, MirrorRow, NewMirrored, SeenUpdate, placement, plan
from reactor.cd.objects import (
    APPLICATION,
    HELMRELEASE,
    KUSTOMIZATION,
    MARK,
    CdObject,
    Destination,
    Unreadable,
    parse_bool,
    read_object,
)
from reactor.cd.targets import ClusterIndex, Unresolved
from reactor.cd.watch import stored
from reactor.statemachine import CLUSTER_OFFLINE, AppStatus, Status
from reactor.store import KnownCluster


def flux(kind: str = "Kustomization", **spec: Any) -> dict[str, Any]:
    group = (
        "kustomize.toolkit.fluxcd.io/v1" if kind == "Kustomization" else "helm.toolkit.fluxcd.io/v2"
    )
    return {
        "apiVersion": group,
        "kind": kind,
        "metadata": {"name": "apps", "namespace": "team-a", "uid": "u1", "resourceVersion": "41"},
        "spec": {"interval": "10m", **spec},
    }


def argo(destination: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "web",
        "namespace": "argocd",
        "uid": "u2",
        "resourceVersion": "7",
    }
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": meta,
        "spec": {"project": "default", "destination": destination},
    }


def test_a_kustomization_names_its_secret_in_its_own_namespace() -> None:
    read = read_object(flux(kubeConfig={"secretRef": {"name": "prod-1-kubeconfig"}}))
    assert isinstance(read, CdObject)
    assert read.kind is KUSTOMIZATION and read.app_name == "flux:Kustomization/team-a/apps"
    assert read.destination == Destination("secret://team-a/prod-1-kubeconfig", None)
    assert (read.uid, read.resource_version, read.paused, read.mark) == ("u1", "41", False, None)
    assert read.path == "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/team-a/kustomizations/apps"


def test_a_helmrelease_with_a_key_and_suspended_with_the_mark() -> None:
    obj = flux("HelmRelease", suspend=True, kubeConfig={"secretRef": {"name": "s", "key": "cfg"}})
    obj["metadata"]["annotations"] = {MARK: "12"}
    read = read_object(obj)
    assert isinstance(read, CdObject) and read.kind is HELMRELEASE
    assert read.destination == Destination("secret://team-a/s", "cfg")
    assert (read.paused, read.mark) == (True, "12")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (flux(), None),  # deploys to the management cluster itself
        (flux(kubeConfig={"configMapRef": {"name": "aks"}}), "names no secretRef"),
        (flux(kubeConfig={"secretRef": {}}), "secretRef has no name"),
        (flux(kubeConfig="x"), "spec.kubeConfig is not an object"),
        (flux(kubeConfig={"secretRef": {"name": "s", "key": 1}}), "key is not a string"),
        (argo({"name": "a", "server": "https://a"}), "both name and server"),
        (argo({"namespace": "web"}), "names no cluster"),
        ({"apiVersion": "v1", "kind": "Secret", "metadata": {}}, None),
        ({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {}}, None),
    ],
)
def test_objects_that_are_not_ours_or_name_no_cluster(
    obj: dict[str, Any], expected: str | None
) -> None:
    read = read_object(obj)
    if expected is None:
        assert read is None
    else:
        assert isinstance(read, Unreadable) and expected in read.reason


def test_an_application_is_paused_as_argo_cd_parses_the_annotation() -> None:
    for value, paused in [
        ("true", True),
        ("True", True),
        ("1", True),
        ("false", False),
        ("yes", False),
    ]:
        read = read_object(
            argo({"server": "https://c1:6443/"}, {"argocd.argoproj.io/skip-reconcile": value})
        )
        assert isinstance(read, CdObject) and read.paused is paused, value
        assert read.kind is APPLICATION
        assert read.destination == Destination(argocd_server="https://c1:6443")
    assert not parse_bool(None) and not parse_bool(True)


@pytest.mark.parametrize(
    ("managers", "by_owner"),
    [
        (["kustomize-controller"], True),
        (["kustomize-controller", "kubectl-patch"], False),
        (["kubectl-patch"], False),
        ([], False),
    ],
)
def test_who_resumed_is_read_from_the_managed_fields(managers: list[str], by_owner: bool) -> None:
    obj = flux(suspend=False, kubeConfig={"secretRef": {"name": "s"}})
    obj["metadata"]["managedFields"] = [
        {"manager": m, "fieldsV1": {"f:spec": {"f:suspend": {}}}} for m in managers
    ] + [{"manager": "helm-controller", "fieldsV1": {"f:spec": {"f:interval": {}}}}]
    read = read_object(obj)
    assert isinstance(read, CdObject) and read.resumed_by_owner is by_owner


# -- clusters ----------------------------------------------------------------------------

INDEX = ClusterIndex.of(
    [
        KnownCluster("prod-1", "https://p1:6443", "secret://team-a/prod-1-kubeconfig"),
        KnownCluster("argo-x", "https://x:6443/", "secret://argocd/cluster-x"),
        KnownCluster("ctx-a", "https://a:6443", "secret://team-a/multi#value"),
        KnownCluster("ctx-b", "https://b:6443", "secret://team-a/multi#value"),
        KnownCluster("only", "https://o:6443", "secret://team-a/labelled#value.yaml"),
        KnownCluster("file", "https://f:6443", "/etc/kube/config"),
        KnownCluster("dup-1", "https://dup:6443", "secret://argocd/d1"),
        KnownCluster("dup-2", "https://dup:6443", "secret://argocd/d2"),
    ]
)


def flux_to(secret: str, key: str | None = None) -> Destination:
    """A Flux object's destination naming ``secret`` (NAMESPACE/NAME), and ``key``."""
    return Destination(f"secret://{secret}", key)


@pytest.mark.parametrize(
    ("destination", "expected"),
    [
        (flux_to("team-a/prod-1-kubeconfig"), "prod-1"),  # a Cluster API Secret
        (flux_to("team-a/labelled"), "only"),  # a labelled Secret's value.yaml
        (flux_to("team-a/multi"), "holds 2 clusters"),
        (flux_to("team-b/prod-1-kubeconfig"), "no cluster discovered from Secret"),
        (flux_to("team-a/multi", "other"), "no cluster discovered"),
        (flux_to("team-a/prod-1-kubeconfig", "value"), "prod-1"),  # Cluster API's key
        (Destination(argocd_name="argo-x"), "argo-x"),
        (Destination(argocd_name="only"), "no cluster discovered"),  # a labelled Secret's
        (Destination(argocd_name="file"), "no cluster discovered"),  # a file's
        (Destination(argocd_server="https://x:6443"), "argo-x"),
        (Destination(argocd_server="https://dup:6443"), "2 Argo CD clusters"),
        (Destination(argocd_server="https://f:6443"), "no cluster discovered"),
    ],
)
def test_destinations_resolve_to_the_store_clusters(
    destination: Destination, expected: str
) -> None:
    found = INDEX.resolve(destination)
    if isinstance(found, Unresolved):
        assert expected in found.reason
    else:
        assert found == expected


def test_a_duplicate_secret_of_a_store_cluster_names_it_for_flux() -> None:
    """fleetwatch.discovery.merge's aliases: Cluster API's Secret of a cluster kept by its Argo CD
    Secret resolves to it; an alias of a cluster the store lacks does not; a ref a store
    cluster holds itself is that cluster's, whatever an alias says."""
    clusters = [KnownCluster("prod-1", "https://p1:6443", "secret://argocd/cluster-p1")]
    aliases = {
        "secret://team-a/prod-1-kubeconfig": "prod-1",
        "secret://team-a/gone-kubeconfig": "gone",
        "secret://argocd/cluster-p1": "prod-2",
    }
    index = ClusterIndex.of(clusters, aliases)
    assert index.resolve(flux_to("team-a/prod-1-kubeconfig")) == "prod-1"
    assert isinstance(index.resolve(flux_to("team-a/gone-kubeconfig")), Unresolved)
    assert index.resolve(flux_to("argocd/cluster-p1")) == "prod-1"
    without = ClusterIndex.of(clusters)
    assert isinstance(without.resolve(flux_to("team-a/prod-1-kubeconfig")), Unresolved)


def _shape(kind: Kind) -> SecretShape:
    keys = {"argocd": {"name", "server", "config"}, "cluster-api": {"value"}}
    return SecretShape(kind, frozenset(keys.get(kind, {"value"})))


#: What discovery read through the API: Argo CD's Secrets and the others told apart.
#: capi-only has Cluster API's Secret alone; both-p is kept by Cluster API's, with Argo
#: CD's Secret of it the alias; in-c is Argo CD's Secret of the cluster it runs in.
ARGO = ClusterIndex.of(
    [
        KnownCluster("argo-x", "https://x:6443", "secret://argocd/cluster-x"),
        KnownCluster("capi-only", "https://capi:6443", "secret://team-a/capi-only-kubeconfig"),
        KnownCluster("both-p", "https://p:6443", "secret://acme/both-p-kubeconfig"),
        KnownCluster("edge", "https://e:6443", "secret://team-a/labelled#value"),
        KnownCluster("in-c", "https://kubernetes.default.svc", "secret://argocd/cluster-in"),
    ],
    {"secret://argocd/cluster-p": "both-p"},
    {
        "secret://argocd/cluster-x": _shape("argocd"),
        "secret://argocd/cluster-p": _shape("argocd"),
        "secret://argocd/cluster-in": _shape("argocd"),
        "secret://team-a/capi-only-kubeconfig": _shape("cluster-api"),
        "secret://acme/both-p-kubeconfig": _shape("cluster-api"),
        "secret://team-a/labelled": _shape("labelled"),
    },
)


@pytest.mark.parametrize(
    ("destination", "expected"),
    [
        (Destination(argocd_name="argo-x"), "argo-x"),
        (Destination(argocd_server="https://x:6443"), "argo-x"),
        (Destination(argocd_name="both-p"), "both-p"),  # Argo CD's Secret is the alias
        (Destination(argocd_server="https://p:6443"), "both-p"),
        (
            Destination(argocd_name="capi-only"),
            "Argo CD knows no cluster Secret named 'capi-only': the cluster discovered as "
            "capi-only came from secret://team-a/capi-only-kubeconfig (a Cluster API Secret), "
            "which Argo CD does not read",
        ),
        (
            Destination(argocd_server="https://capi:6443"),
            "Argo CD knows no cluster Secret with server https://capi:6443: the cluster there, "
            "capi-only, came from secret://team-a/capi-only-kubeconfig (a Cluster API Secret), "
            "which Argo CD does not read",
        ),
        (Destination(argocd_name="edge"), "Argo CD knows no cluster Secret named 'edge'"),
        (Destination(argocd_name="nowhere"), "no cluster discovered as Argo CD cluster"),
        # Argo CD's own name of the cluster it runs in, held by a Secret at its address
        (Destination(argocd_name="in-cluster"), "in-c"),
        (Destination(argocd_server="https://kubernetes.default.svc"), "in-c"),
        (Destination(argocd_name="in-c"), "in-c"),
    ],
)
def test_argo_cd_resolves_against_its_own_cluster_secrets_only(
    destination: Destination, expected: str
) -> None:
    """As argo-cd ``util/argo/argo.go`` and ``util/db/cluster.go``: a name or server a
    Cluster API or labelled Secret alone gives is none Argo CD knows, whatever the store
    calls it; the Flux objects' resolution of the same Secrets is unchanged."""
    found = ARGO.resolve(destination)
    if isinstance(found, Unresolved):
        assert found.reason.startswith(expected)
    else:
        assert found == expected
    assert ARGO.resolve(flux_to("team-a/capi-only-kubeconfig")) == "capi-only"
    assert ARGO.resolve(flux_to("acme/both-p-kubeconfig")) == "both-p"


def test_unresolved_applications_are_counted_and_change_nothing_else() -> None:
    """The mirror's plan with an Application naming a Cluster API cluster: one unresolved
    entry (the actuator logs it and counts it in ``fleetwatch_reactor_cd_unresolved_objects``),
    the Application by Argo CD's name inserted, nothing else written."""
    app = CdObject(APPLICATION, "argocd", "a", "u1", "1", Destination(argocd_name="argo-x"), False)
    capi = CdObject(
        APPLICATION, "argocd", "b", "u2", "1", Destination(argocd_name="capi-only"), False
    )
    result = plan({o.app_name: o for o in (app, capi)}, ARGO, {})
    assert [(i.name, i.cluster) for i in result.inserts] == [(app.app_name, "argo-x")]
    assert list(result.unresolved) == [capi.app_name]
    assert result.unresolved[capi.app_name].startswith("Argo CD knows no cluster Secret named")
    assert not (result.moves or result.updates or result.deletes)


# -- the mirror --------------------------------------------------------------------------


def obj(
    name: str, cluster: str, paused: bool = False, mark: str | None = None, uid: str = "u"
) -> CdObject:
    return CdObject(
        KUSTOMIZATION, "ns", name, uid, "1", Destination(argocd_name=cluster), paused, mark
    )


def row(
    app_id: int,
    name: str,
    cluster: str,
    paused: bool = False,
    mark: str | None = None,
    uid: str = "u",
) -> MirrorRow:
    return MirrorRow(app_id, f"flux:Kustomization/ns/{name}", "flux", cluster, uid, paused, mark)


def test_the_mirror_inserts_moves_updates_and_deletes() -> None:
    index = ClusterIndex.of(
        [KnownCluster(n, f"https://{n}", f"secret://argocd/{n}") for n in ("c1", "c2")]
    )
    objects = {o.app_name: o for o in [
        obj("new", "c1"),
        obj("same", "c1"),
        obj("moved", "c2"),
        obj("paused", "c1", True, "4"),
        obj("recreated", "c1", uid="u-new"),
        obj("lost", "c9"),
    ]}  # fmt: skip
    objects["flux:Kustomization/ns/bad"] = Unreadable("flux:Kustomization/ns/bad", "why")
    rows = {r.name: r for r in [
        row(1, "same", "c1"),
        row(2, "moved", "c1"),
        row(3, "paused", "c1"),
        row(4, "recreated", "c1"),
        row(5, "gone", "c1"),
        row(6, "lost", "c1"),
    ]}  # fmt: skip
    result = plan(objects, index, rows)
    assert result.inserts == [
        NewMirrored("flux:Kustomization/ns/new", "flux", "c1", "u", False, None)
    ]
    assert result.moves == [(2, "c2")]
    assert result.updates == [SeenUpdate(3, "u", True, "4"), SeenUpdate(4, "u-new", False, None)]
    assert sorted(result.deletes) == [5, 6]
    assert result.unresolved == {
        "flux:Kustomization/ns/bad": "why",
        "flux:Kustomization/ns/lost": "no cluster discovered as Argo CD cluster 'c9'",
    }
    assert (
        plan(
            objects, index, {**rows, **{i.name: row(9, i.name[20:], "c1") for i in result.inserts}}
        ).inserts
        == []
    )


def test_a_plan_of_many_inserts_is_written_as_several_the_rest_with_the_last() -> None:
    """A first list's thousands of new apps: several short transactions (``split``)."""
    news = [NewMirrored(f"flux:Kustomization/ns/o{i}", "flux", "c1", "u", False, None)
            for i in range(7)]  # fmt: skip
    whole = MirrorPlan(news, [(2, "c2")], [SeenUpdate(3, "u", True, "4")], [5], {"x": "why"})
    parts = whole.split(3)
    assert [len(p.inserts) for p in parts] == [3, 3, 1]
    assert [i for p in parts for i in p.inserts] == news  # each once, in order
    assert all((p.moves, p.updates, p.deletes, p.unresolved) == ([], [], [], {})
               for p in parts[:-1])  # fmt: skip
    assert (parts[-1].moves, parts[-1].updates, parts[-1].deletes) == (
        whole.moves, whole.updates, whole.deletes)  # fmt: skip
    assert parts[-1].unresolved == {"x": "why"}
    assert [len(p.inserts) for p in MirrorPlan(news[:6]).split(3)] == [3, 3]
    assert whole.split(10) == [whole] and MirrorPlan().split(3) == [MirrorPlan()]


def test_an_app_placed_on_an_offline_cluster_joins_its_outage() -> None:
    assert placement(Status.OFFLINE, 3) == (AppStatus.DEGRADED, CLUSTER_OFFLINE, 3)
    assert placement(Status.OFFLINE, None) == (AppStatus.DEPLOYED, None, None)  # never ONLINE
    assert placement(Status.UNKNOWN, 3) == (AppStatus.DEPLOYED, None, None)  # gate allows it
    assert placement(Status.ONLINE, None) == (AppStatus.DEPLOYED, None, None)


def test_the_informer_keeps_only_who_owns_the_pause() -> None:
    obj = flux(suspend=False, kubeConfig={"secretRef": {"name": "s"}})
    obj["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        MARK: "3",
    }
    obj["metadata"]["managedFields"] = [
        {"manager": "kustomize-controller", "operation": "Apply", "time": "t",
         "fieldsV1": {"f:spec": {"f:suspend": {}, "f:interval": {}}}},
        {"manager": "fleetwatch", "operation": "Update",
         "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{MARK}": {}}}}},
    ]  # fmt: skip
    kept = stored(obj)
    assert kept["metadata"]["managedFields"] == [
        {"manager": "kustomize-controller", "fieldsV1": {"f:spec": {"f:suspend": {}}}}
    ]
    assert kept["metadata"]["annotations"] == {MARK: "3"}
    assert read_object(kept) == read_object(obj)
    read = read_object(kept)
    assert isinstance(read, CdObject) and read.resumed_by_owner
    app = argo({"name": "c1"})
    assert "managedFields" not in stored(app)["metadata"]
