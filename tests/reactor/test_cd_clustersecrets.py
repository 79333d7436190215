"""Argo CD's cluster Secrets as ``--cd.argocd.pause cluster-secret`` reads and decides them
(reactor.cd.clustersecrets, reactor.cd.rules.secret_view): pure tables, and the stories of
docs/cd.md played on Secret dicts with the real patches."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from fleetwatch.standin.management.patches import merge_patch
from reactor.cd.clustersecrets import (
    ClusterSecret,
    SecretDecision,
    cluster_of,
    decide_secrets,
    kept,
    read_cluster_secret,
)
from reactor.cd.objects import MARK, SKIP_RECONCILE
from reactor.cd.patches import patch_for
from reactor.cd.rules import (
    Observed,
    StoreView,
    Verb,
    decide,
    decide_without_pausing,
    secret_view,
)
from reactor.cd.targets import ClusterIndex
from reactor.cd.watch import stored
from reactor.statemachine import AppStatus, Status
from reactor.store import KnownCluster, MirroredApp

ON, OFF, UNK = Status.ONLINE, Status.OFFLINE, Status.UNKNOWN
DEP, DEG, PEN = AppStatus.DEPLOYED, AppStatus.DEGRADED, AppStatus.PENDING
CONFIG = '{"bearerToken": "not-a-real-token"}'


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(
    name: str = "cluster-c1",
    cluster: str | None = "c1",
    annotations: dict[str, str] | None = None,
    version: str = "5",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "argocd",
        "uid": f"uid-{name}",
        "resourceVersion": version,
        "labels": {"argocd.argoproj.io/secret-type": "cluster"},
    }
    if annotations is not None:
        meta["annotations"] = annotations
    data = {"server": b64("https://c1.test:6443"), "config": b64(CONFIG)}
    if cluster is not None:
        data["name"] = b64(cluster)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, "data": data}


# -- reading -------------------------------------------------------------------------------


def test_a_cluster_secret_reads_as_its_pause_mark_and_argocd_name() -> None:
    read = read_cluster_secret(secret(annotations={SKIP_RECONCILE: "true", MARK: "7"}))
    assert read == ClusterSecret("argocd", "cluster-c1", "uid-cluster-c1", "5", "c1", True, "7")
    assert read.key == "argocd:Secret/argocd/cluster-c1"
    assert read.path == "/api/v1/namespaces/argocd/secrets/cluster-c1"
    assert read.ref == "secret://argocd/cluster-c1"
    running = read_cluster_secret(secret(annotations={SKIP_RECONCILE: "false"}))
    assert running is not None and not running.paused and running.mark is None


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["metadata"]["labels"].clear(),  # not Argo CD's
        lambda s: s.update(kind="ConfigMap"),
        lambda s: s["metadata"].pop("uid"),
        lambda s: s["metadata"].update(namespace=""),
    ],
)
def test_anything_else_is_not_a_cluster_secret(change: Any) -> None:
    obj = secret()
    change(obj)
    assert read_cluster_secret(obj) is None


def test_a_name_key_missing_or_not_base64_names_no_argocd_cluster() -> None:
    assert read_cluster_secret(secret(cluster=None)).argocd_name is None  # type: ignore[union-attr]
    obj = secret()
    obj["data"]["name"] = "not base64!"
    assert read_cluster_secret(obj).argocd_name is None  # type: ignore[union-attr]


def test_the_informer_keeps_no_credential_of_a_cluster_secret() -> None:
    obj = secret(annotations={
        SKIP_RECONCILE: "true",
        MARK: "7",
        "kubectl.kubernetes.io/last-applied-configuration": f'{{"stringData": {CONFIG}}}',
    })  # fmt: skip
    obj["metadata"]["managedFields"] = [
        {"manager": "kubectl-annotate", "operation": "Update",
         "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{SKIP_RECONCILE}": {}}}}},
        {"manager": "argocd-server", "operation": "Update", "fieldsV1": {"f:data": {}}},
    ]  # fmt: skip
    kept_obj = stored(obj)
    assert kept_obj == kept(obj)
    assert set(kept_obj["data"]) == {"name"}
    assert "not-a-real-token" not in repr(kept_obj) and b64(CONFIG) not in repr(kept_obj)
    assert "last-applied" not in repr(kept_obj)
    assert kept_obj["metadata"]["managedFields"] == [
        {"manager": "kubectl-annotate",
         "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{SKIP_RECONCILE}": {}}}}},
    ]  # fmt: skip
    assert read_cluster_secret(kept_obj) == read_cluster_secret(obj)


def test_a_cluster_secret_listed_without_its_type_is_kept_as_one_watched() -> None:
    # a list's items of a built-in kind carry no apiVersion nor kind (a watch's objects do)
    obj = secret(annotations={SKIP_RECONCILE: "true", MARK: "7"})
    listed = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    assert stored(listed) == stored(obj) == kept(obj)
    assert set(stored(listed)["data"]) == {"name"}
    assert read_cluster_secret(stored(listed)) == read_cluster_secret(obj)


def test_a_secret_found_without_skip_reconcile_owned_by_a_controller_was_reverted() -> None:
    obj = secret(annotations={MARK: "7"})
    obj["metadata"]["managedFields"] = [
        {"manager": "kustomize-controller", "operation": "Apply",
         "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{SKIP_RECONCILE}": {}}}}},
    ]  # fmt: skip
    read = read_cluster_secret(stored(obj))
    assert read is not None and read.resumed_by_owner and not read.paused


# -- which cluster --------------------------------------------------------------------------

INDEX = ClusterIndex.of(
    [
        KnownCluster("c1", "https://c1.test:6443", "secret://argocd/cluster-c1"),
        KnownCluster("capi", "https://capi.test:6443", "secret://team-a/capi-kubeconfig"),
        KnownCluster("labelled", "https://l.test:6443", "secret://argocd/mixed#value"),
    ]
)


@pytest.mark.parametrize(
    ("name", "argocd_name", "cluster"),
    [
        ("cluster-c1", "c1", "c1"),  # the Secret discovery named the cluster by
        ("cluster-c1", "other", "c1"),  # by the Secret first
        ("argo-capi", "capi", "capi"),  # discovered from a Cluster API Secret: by name
        ("argo-x", "x", None),  # no such cluster
        ("argo-l", "labelled", None),  # a labelled Secret's key: not an Argo CD name
        ("mixed", None, None),  # secret://argocd/mixed names no cluster without its key
    ],
)
def test_a_secret_is_the_cluster_discovery_read_from_it_else_the_one_it_names(
    name: str, argocd_name: str | None, cluster: str | None
) -> None:
    read = ClusterSecret("argocd", name, "u", "1", argocd_name, False)
    assert cluster_of(read, INDEX) == cluster


# -- the rules: one app standing for the cluster's Applications ---------------------------

VIEW_CASES = [
    # (what, cluster status, open outage, apps (status, outage), view)
    ("no Applications, no outage", ON, None, [], StoreView(ON, None, DEP)),
    ("no Applications in the outage: never paused", OFF, 7, [], StoreView(OFF, 7, DEP)),
    ("one of them in the outage", OFF, 7, [(DEG, 7), (DEP, None)], StoreView(OFF, 7, DEG, 7)),
    ("a person resumed all of them", OFF, 7, [(DEP, None), (DEP, None)], StoreView(OFF, 7, DEP)),
    ("restored", ON, None, [(DEP, None), (DEP, None)], StoreView(ON, None, DEP)),
    ("all held DEGRADED for another reason", ON, None, [(DEG, None), (PEN, None)],
     StoreView(ON, None, DEG)),
    ("one DEPLOYED among them", ON, None, [(DEG, None), (DEP, None)], StoreView(ON, None, DEP)),
    ("storm guard: OFFLINE without an outage", OFF, None, [(DEP, None)],
     StoreView(OFF, None, DEP)),
]  # fmt: skip


@pytest.mark.parametrize(("what", "status", "outage", "apps", "view"), VIEW_CASES)
def test_secret_view_table(
    what: str,
    status: Status,
    outage: int | None,
    apps: list[tuple[AppStatus, int | None]],
    view: StoreView,
) -> None:
    assert secret_view(status, outage, apps) == view, what


def every_view_input() -> list[tuple[Status, int | None, list[tuple[AppStatus, int | None]]]]:
    apps = list(itertools.product(AppStatus, (None, 7)))
    groups = [[], *([a] for a in apps), *(list(p) for p in itertools.combinations(apps, 2))]
    return [(s, o, g) for s in Status for o in (None, 7) for g in groups]


def test_a_secret_is_paused_only_in_an_outage_of_its_applications_and_never_resumed_offline() -> (
    None
):
    """The Application invariants, for the Secret, over every cluster and Applications."""
    seen_all = [
        Observed(p, m, o)
        for p, m, o in itertools.product((False, True), (None, "7", "5"), (False, True))
    ]
    for status, outage, apps in every_view_input():
        view = secret_view(status, outage, apps)
        for seen in seen_all:
            d = decide(view, seen)
            case = (status, outage, apps, seen, d)
            if d.verb in (Verb.PAUSE, Verb.REMARK):
                assert outage is not None and any(o == outage for _, o in apps), case
            if d.verb is Verb.RESUME:
                assert status is not OFF, case
                assert not apps or any(s is DEP for s, _ in apps), case
                assert all(o != outage for _, o in apps if outage is not None), case
            if seen.paused and seen.mark is None:
                assert d.verb is Verb.NOTHING, case


WITHOUT_PAUSING = [
    # (what, view, seen, verb): an Application whose cluster Secret carries the pause
    ("its cluster's outage opens: the Secret pauses, not it", StoreView(OFF, 7, DEG, 7),
     Observed(False), Verb.NOTHING),
    ("our pause of it before the mode changed, outage on", StoreView(OFF, 7, DEG, 7),
     Observed(True, "7"), Verb.NOTHING),
    ("that pause, once restored: resumed", StoreView(ON, None, DEP), Observed(True, "7"),
     Verb.RESUME),
    ("resumed by a person: the mark dropped, nothing left", StoreView(OFF, 7, DEG, 7),
     Observed(False, "7"), Verb.DROP_MARK),
    ("an older mark during an outage: not remarked", StoreView(UNK, 7, DEG, 7),
     Observed(True, "5"), Verb.NOTHING),
    ("someone else's pause", StoreView(ON, None, DEP), Observed(True), Verb.NOTHING),
]  # fmt: skip


@pytest.mark.parametrize(("what", "view", "seen", "verb"), WITHOUT_PAUSING)
def test_applications_are_not_paused_themselves_in_cluster_secret_mode(
    what: str, view: StoreView, seen: Observed, verb: Verb
) -> None:
    decision = decide_without_pausing(view, seen)
    assert (decision.verb, decision.leave_outage) == (verb, None), what


def test_decide_without_pausing_never_pauses_for_any_input() -> None:
    for status, outage, app_status, app_outage in itertools.product(
        Status, (None, 7), AppStatus, (None, 7)
    ):
        view = StoreView(status, outage, app_status, app_outage)
        for paused, mark, owner in itertools.product((False, True), (None, "7", "5"), (0, 1)):
            d = decide_without_pausing(view, Observed(paused, mark, bool(owner)))
            assert d.verb not in (Verb.PAUSE, Verb.REMARK) and d.leave_outage is None
            if d.verb is Verb.RESUME:
                assert status is not OFF and app_status is DEP


# -- decide_secrets: Secrets, clusters and the mirrored Applications -------------------------


def app(app_id: int, cluster: str, status: AppStatus, outage: int | None = None) -> MirroredApp:
    c_status, c_outage = (OFF, 7) if cluster == "c1" else (ON, None)
    return MirroredApp(
        app_id, f"argocd:Application/argocd/a{app_id}", "argocd", cluster,
        status, outage, c_status, c_outage, None, None, None,
    )  # fmt: skip


CLUSTERS = [
    KnownCluster("c1", "https://c1.test:6443", "secret://argocd/cluster-c1", OFF, 7),
    KnownCluster("c2", "https://c2.test:6443", "secret://argocd/cluster-c2", ON, None),
]


def test_one_decision_per_secret_from_its_clusters_applications() -> None:
    apps = [
        app(1, "c1", DEG, 7),
        app(2, "c1", DEG, 7),
        app(3, "c2", DEP),
        MirroredApp(
            4, "flux:Kustomization/f/k", "flux", "c2", DEG, None, ON, None, None, None, None
        ),
    ]
    secrets = [
        ClusterSecret("argocd", "cluster-c1", "u1", "3", "c1", False),
        ClusterSecret("argocd", "cluster-c2", "u2", "4", "c2", True, "6"),  # an old pause
        ClusterSecret("argocd", "cluster-gone", "u3", "5", "gone", False),
    ]
    decided, unresolved = decide_secrets(secrets, CLUSTERS, apps)
    assert [(d.cluster, d.decision.verb, d.decision.mark) for d in decided] == [
        ("c1", Verb.PAUSE, "7"),
        ("c2", Verb.RESUME, None),
    ]
    why = "no cluster discovered from this Argo CD cluster Secret"
    assert unresolved == {"argocd:Secret/argocd/cluster-gone": why}


def test_a_person_resuming_the_secret_takes_its_applications_out_of_the_outage() -> None:
    apps = [app(1, "c1", DEG, 7), app(2, "c1", DEP), app(5, "c1", DEG, 7)]
    resumed = ClusterSecret("argocd", "cluster-c1", "u1", "9", "c1", False, "7")
    (decision,), _ = decide_secrets([resumed], CLUSTERS, apps)
    assert decision == SecretDecision(resumed, "c1", decision.decision, leaving=((1, 7), (5, 7)))
    assert decision.decision.verb is Verb.DROP_MARK and decision.decision.leave_outage == 7


# -- the story, on a Secret dict --------------------------------------------------------------


def settle(obj: dict[str, Any], apps: Sequence[tuple[AppStatus, int | None]], status: Status,
           outage: int | None) -> tuple[dict[str, Any], list[Verb]]:  # fmt: skip
    verbs: list[Verb] = []
    for _ in range(5):
        read = read_cluster_secret(obj)
        assert read is not None
        d = decide(secret_view(status, outage, apps), read.observed)
        if d.verb is Verb.NOTHING:
            return obj, verbs
        verbs.append(d.verb)
        patch = patch_for(d, read, "2026-12-02T10:00:00Z")
        assert patch is not None and "spec" not in patch
        assert patch["metadata"]["resourceVersion"] == read.resource_version
        obj = merge_patch(obj, patch)
        obj["metadata"]["resourceVersion"] = str(int(read.resource_version) + 1)
    raise AssertionError(f"no fixed point: {verbs}")


def test_one_patch_pauses_the_cluster_and_one_resumes_it() -> None:
    degraded = [(DEG, 7), (DEG, 7), (DEG, 7)]
    obj, verbs = settle(secret(), degraded, OFF, 7)
    assert verbs == [Verb.PAUSE]
    assert obj["metadata"]["annotations"] == {SKIP_RECONCILE: "true", MARK: "7"}
    assert obj["data"] == secret()["data"]  # the credentials untouched
    obj, verbs = settle(obj, [(DEP, None)] * 3, ON, None)
    assert verbs == [Verb.RESUME]
    assert obj["metadata"]["annotations"] == {}


def test_a_secret_paused_by_hand_stays_paused() -> None:
    obj, verbs = settle(secret(annotations={SKIP_RECONCILE: "true"}), [(DEG, 7)], OFF, 7)
    assert verbs == []
    obj, verbs = settle(obj, [(DEP, None)], ON, None)
    assert verbs == [] and obj["metadata"]["annotations"] == {SKIP_RECONCILE: "true"}


def test_the_storm_guard_holds_for_secrets() -> None:
    """OFFLINE without an outage (inhibited, silenced, never ONLINE): nothing is paused."""
    assert settle(secret(), [(DEP, None)], OFF, None)[1] == []
