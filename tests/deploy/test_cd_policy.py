"""The cd-admission-policy component: its CEL expressions admit fleetwatch's own patches
and refuse anything else its ServiceAccount might write (docs/deployment.md#the-admission-policy).

The policy and its binding are read from the rendered ``overlays/cd`` (what a user
applies) and evaluated with cel-python as kube-apiserver evaluates them
(``deploy_policy.Policy``). tests/deploy/test_cd_rbac_live.py also passes every write the
reactor made over the wire to the stand-in through it.

Here the requests are built as the API server builds them for a JSON merge patch: the stored
object (``oldObject``) with the patch applied (the stand-in's RFC 7386 merge), then what
the server changes itself before admission: the ``managedFields`` entry of the field
manager, and ``generation`` bumped when a custom resource's spec changed. The patches are
the ones ``reactor.cd.patches.patch_for`` makes for each verb.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from fleetwatch.standin.management.patches import merge_patch
from reactor.cd.clustersecrets import read_cluster_secret
from reactor.cd.objects import MARK, REQUESTED_AT, SKIP_RECONCILE, CdObject, read_object
from reactor.cd.patches import FIELD_MANAGER, patch_for
from reactor.cd.rules import Decision, Verb
from tests.helpers.deploy_manifests import Obj, find, render
from tests.helpers.deploy_policy import REACTOR, Policy

FLUX_CONTROLLER = "system:serviceaccount:flux-system:kustomize-controller"
STAMP = "2026-12-06T03:00:00Z"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.of(render("overlays/cd"))


# --- realistic stored objects ---------------------------------------------------------------


def _meta(name: str, namespace: str, **extra: Any) -> Obj:
    return {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": "4711",
        "generation": 3,
        "creationTimestamp": "2026-11-01T10:00:00Z",
        "labels": {"team": "payments"},
        "annotations": {LAST_APPLIED: '{"kind":"..."}'},
        "managedFields": [
            {"manager": "kubectl-client-side-apply", "operation": "Update",
             "apiVersion": "v1", "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}},
        ],
        **extra,
    }  # fmt: skip


def kustomization() -> Obj:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": _meta("apps", "flux-system", finalizers=["finalizers.fluxcd.io"]),
        "spec": {
            "interval": "10m",
            "path": "./clusters/c1",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "fleet"},
            "kubeConfig": {"secretRef": {"name": "c1-kubeconfig"}},
        },
        "status": {"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def helmrelease() -> Obj:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": _meta("podinfo", "flux-system"),
        "spec": {
            "interval": "5m",
            "chart": {"spec": {"chart": "podinfo", "version": "6.5.0",
                               "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}},
            "values": {"replicaCount": 2, "resources": {"limits": {"cpu": 0.5}}},
            "kubeConfig": {"secretRef": {"name": "c1-kubeconfig", "key": "value"}},
        },
    }  # fmt: skip


def application() -> Obj:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": _meta("guestbook", "argocd"),
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://git.example.com/apps.git", "path": "guestbook",
                       "targetRevision": "main"},
            "destination": {"name": "c1", "namespace": "guestbook"},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
        },
        "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}},
    }  # fmt: skip


def cluster_secret(labels: Obj | None = None) -> Obj:
    meta = _meta("cluster-c1.test-1234", "argocd")
    meta["labels"] = labels if labels is not None else {"argocd.argoproj.io/secret-type": "cluster"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "data": {"name": "YzE=", "server": "aHR0cHM6Ly9jMS50ZXN0OjY0NDM=", "config": "e30="},
    }


RESOURCES = {
    "Kustomization": ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations"),
    "HelmRelease": ("helm.toolkit.fluxcd.io", "v2", "helmreleases"),
    "Application": ("argoproj.io", "v1alpha1", "applications"),
    "Secret": ("", "v1", "secrets"),
}


def request(obj: Obj, operation: str = "UPDATE", user: str = REACTOR) -> Obj:
    group, version, resource = RESOURCES[obj["kind"]]
    return {
        "operation": operation,
        "userInfo": {"username": user},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": obj["metadata"]["namespace"],
        "name": obj["metadata"]["name"],
    }


def as_server(old: Obj, patch: Obj, manager: str = FIELD_MANAGER) -> Obj:
    """``oldObject`` with a merge patch applied, as admission sees it (module docstring)."""
    new: Obj = merge_patch(old, patch)
    meta = new["metadata"]
    entry = {"manager": manager, "operation": "Update", "apiVersion": old["apiVersion"],
             "time": STAMP, "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}  # fmt: skip
    meta["managedFields"] = [e for e in meta.get("managedFields", []) if e["manager"] != manager]
    meta["managedFields"].append(entry)
    if old["kind"] != "Secret" and new.get("spec") != old.get("spec"):
        meta["generation"] = old["metadata"]["generation"] + 1
    return new


def fleetwatch_patch(old: Obj, decision: Decision) -> Obj:
    """The patch the reactor sends for ``decision`` on ``old``."""
    target = read_cluster_secret(old) if old["kind"] == "Secret" else read_object(old)
    assert target is not None and (old["kind"] == "Secret" or isinstance(target, CdObject))
    patch = patch_for(decision, target, STAMP)  # type: ignore[arg-type]
    assert patch is not None
    return patch


PAUSE = Decision(Verb.PAUSE, mark="17")
REMARK = Decision(Verb.REMARK, mark="18")
RESUME = Decision(Verb.RESUME)
DROP_MARK = Decision(Verb.DROP_MARK)
MAKERS: dict[str, Callable[[], Obj]] = {
    "Kustomization": kustomization,
    "HelmRelease": helmrelease,
    "Application": application,
    "Secret": cluster_secret,
}


# --- fleetwatch's own patches: admitted -----------------------------------------------------


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_every_patch_of_the_reactor_is_admitted_through_a_whole_outage(
    policy: Policy, kind: str
) -> None:
    """Pause, re-mark, resume; and a mark dropped from an object a person paused."""
    stored = MAKERS[kind]()
    for decision in (PAUSE, REMARK, RESUME, PAUSE, DROP_MARK, DROP_MARK):
        patch = fleetwatch_patch(stored, decision)
        new = as_server(stored, patch)
        assert policy.admit(request(new), new, stored) is None, (decision, patch)
        stored = new
    assert MARK not in stored["metadata"]["annotations"]


def test_the_patches_change_what_the_policy_allows_and_nothing_else(policy: Policy) -> None:
    """The admitted requests above do change things (the check cannot pass vacuously)."""
    stored = kustomization()
    paused = as_server(stored, fleetwatch_patch(stored, PAUSE))
    assert paused["spec"]["suspend"] is True and paused["metadata"]["generation"] == 4
    resumed = as_server(paused, fleetwatch_patch(paused, RESUME))
    assert resumed["metadata"]["annotations"][REQUESTED_AT] == STAMP
    app = application()
    app_paused = as_server(app, fleetwatch_patch(app, PAUSE))
    assert app_paused["metadata"]["annotations"][SKIP_RECONCILE] == "true"
    assert app_paused["metadata"]["managedFields"][-1]["manager"] == FIELD_MANAGER


# --- anything else by the reactor: refused --------------------------------------------------

SPEC = "may change no field of spec"
OUTSIDE = "may change no field outside metadata and spec"
METADATA = "may change no metadata but annotations"
ANNOTATION = "may change no annotation but"
ONLY_PATCH = "may patch this object, never create or delete it"
NOT_CLUSTER = "may write no Secret but an Argo CD cluster Secret"

REFUSED: list[tuple[str, Callable[[], Obj], Obj, str]] = [
    ("a Kustomization's source", kustomization,
     {"spec": {"sourceRef": {"name": "attacker"}}}, SPEC),
    ("a Kustomization's path", kustomization, {"spec": {"path": "./evil"}}, SPEC),
    ("a Kustomization's cluster", kustomization,
     {"spec": {"kubeConfig": {"secretRef": {"name": "other"}}}}, SPEC),
    ("a pause that also turns pruning off", kustomization,
     {"spec": {"suspend": True, "prune": False}}, SPEC),
    ("a HelmRelease's chart", helmrelease,
     {"spec": {"chart": {"spec": {"version": "9.9.9"}}}}, SPEC),
    ("a HelmRelease's values", helmrelease, {"spec": {"values": {"replicaCount": 0}}}, SPEC),
    ("an Application's repoURL", application,
     {"spec": {"source": {"repoURL": "https://evil.example.com/x.git"}}}, SPEC),
    ("an Application's suspend field (not Argo CD's pause)", application,
     {"spec": {"suspend": True}}, SPEC),
    ("an Application's operation", application,
     {"operation": {"sync": {"revision": "evil"}}}, OUTSIDE),
    ("an Application's status", application, {"status": {"health": {"status": "Degraded"}}},
     OUTSIDE),
    ("a cluster Secret's config", cluster_secret, {"data": {"config": "eyJldmlsIjp0cnVlfQ=="}},
     OUTSIDE),
    ("a cluster Secret's stringData", cluster_secret, {"stringData": {"server": "https://evil"}},
     OUTSIDE),
    ("a cluster Secret's key removed", cluster_secret, {"data": {"config": None}}, OUTSIDE),
    ("a cluster Secret's type", cluster_secret, {"type": "kubernetes.io/tls"}, OUTSIDE),
    ("a cluster Secret's label", cluster_secret,
     {"metadata": {"labels": {"argocd.argoproj.io/secret-type": "repository"}}}, METADATA),
    ("a label", kustomization, {"metadata": {"labels": {"team": "other"}}}, METADATA),
    ("a finalizer removed", kustomization, {"metadata": {"finalizers": None}}, METADATA),
    ("an owner added", application,
     {"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x",
                                        "uid": "u"}]}}, METADATA),
    ("another annotation", application,
     {"metadata": {"annotations": {"argocd.argoproj.io/refresh": "hard"}}}, ANNOTATION),
    ("kubectl's last-applied copy", cluster_secret,
     {"metadata": {"annotations": {LAST_APPLIED: None}}}, ANNOTATION),
    ("Argo CD's pause on a Flux object", kustomization,
     {"metadata": {"annotations": {SKIP_RECONCILE: "true"}}}, ANNOTATION),
    ("Flux's reconcile request on an Application", application,
     {"metadata": {"annotations": {REQUESTED_AT: STAMP}}}, ANNOTATION),
    ("Flux's reconcile request on a cluster Secret", cluster_secret,
     {"metadata": {"annotations": {REQUESTED_AT: STAMP}}}, ANNOTATION),
]  # fmt: skip


@pytest.mark.parametrize(
    ("make", "patch", "refusal"),
    [pytest.param(make, patch, why, id=what) for what, make, patch, why in REFUSED],
)
def test_any_other_change_by_the_reactor_is_refused(
    policy: Policy, make: Callable[[], Obj], patch: Obj, refusal: str
) -> None:
    stored = make()
    new = as_server(stored, patch)
    message = policy.admit(request(new), new, stored)
    assert message is not None and refusal in message
    # ... and the same change sent by someone else (a person, Flux, Argo CD) is theirs.
    assert policy.admit(request(new, user=FLUX_CONTROLLER), new, stored) is None


def test_another_change_alongside_the_reactors_own_patch_is_refused(policy: Policy) -> None:
    stored = kustomization()
    patch = fleetwatch_patch(stored, PAUSE)
    patch["spec"]["path"] = "./evil"
    new = as_server(stored, patch)
    assert SPEC in (policy.admit(request(new), new, stored) or "")


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_the_reactor_may_neither_delete_nor_create(policy: Policy, kind: str) -> None:
    stored = MAKERS[kind]()
    assert ONLY_PATCH in (policy.admit(request(stored, "DELETE"), None, stored) or "")
    assert ONLY_PATCH in (policy.admit(request(stored, "CREATE"), stored, None) or "")
    assert policy.admit(request(stored, "DELETE", user=FLUX_CONTROLLER), None, stored) is None


def test_no_secret_but_an_argo_cd_cluster_secret_takes_even_the_pause(policy: Policy) -> None:
    """argocd-secret or a repository's credentials: even the annotations are refused."""
    for labels in ({}, {"argocd.argoproj.io/secret-type": "repository"}):
        stored = cluster_secret(labels)
        new = as_server(stored, {"metadata": {"annotations": {MARK: "17"}}})
        assert NOT_CLUSTER in (policy.admit(request(new), new, stored) or "")


def test_a_write_outside_the_policys_kinds_is_not_its_business(policy: Policy) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "fleetwatch-reactor-cd", "namespace": "fleetwatch"}}  # fmt: skip
    resource = {"group": "coordination.k8s.io", "version": "v1", "resource": "leases"}
    req = {"operation": "UPDATE", "userInfo": {"username": REACTOR}, "resource": resource}
    assert not policy.matches(req)
    assert policy.admit(req, lease, copy.deepcopy(lease)) is None


def test_the_reactors_username_is_the_one_the_manifests_bind() -> None:
    """The match condition names the ServiceAccount the cd* bindings grant (and only it)."""
    objects = render("overlays/cd")
    binding = find(objects, "ClusterRoleBinding", "fleetwatch-cd-flux")
    (subject,) = binding["subjects"]
    username = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
    assert username == REACTOR
    (condition,) = find(objects, "ValidatingAdmissionPolicy", "fleetwatch-cd-writes")["spec"][
        "matchConditions"
    ]
    assert condition["expression"] == f"request.userInfo.username == '{REACTOR}'"
    find(objects, "ServiceAccount", subject["name"])


@pytest.mark.parametrize("overlay", ["overlays/cd", "overlays/cd-cluster-secret"])
def test_every_cd_overlay_applies_the_policy_and_the_others_none(overlay: str) -> None:
    objects = render(overlay)
    find(objects, "ValidatingAdmissionPolicy", "fleetwatch-cd-writes")
    find(objects, "ValidatingAdmissionPolicyBinding", "fleetwatch-cd-writes")
    kinds = {o["kind"] for o in render("overlays/argocd")}
    assert "ValidatingAdmissionPolicy" not in kinds


def test_the_policy_validates_against_the_oldest_kubernetes_it_needs() -> None:
    """admissionregistration.k8s.io/v1 is GA in 1.30: strict against that schema (every
    overlay is also validated against 1.32 in test_manifests.py); a misspelt field fails."""
    objects = render("overlays/cd")
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        kubernetes_validate.validate(
            find(objects, kind, "fleetwatch-cd-writes"), "1.30", strict=True
        )
    binding = find(objects, "ValidatingAdmissionPolicyBinding", "fleetwatch-cd-writes")
    binding["spec"]["validationAction"] = binding["spec"].pop("validationActions")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(binding, "1.30", strict=True)


def test_each_refusal_reaches_the_reactors_log_whole() -> None:
    """The reactor keeps 300 characters of an API error's message (fleetwatch.kube.kubeapi);
    kube-apiserver wraps the policy's message as below: for the longest resource name and
    an object named with 63 characters, every message still fits."""
    policy = find(render("overlays/cd"), "ValidatingAdmissionPolicy", "fleetwatch-cd-writes")
    name = "n" * 63
    for validation in policy["spec"]["validations"]:
        wrapped = (
            f'helmreleases.helm.toolkit.fluxcd.io "{name}" is forbidden: '
            "ValidatingAdmissionPolicy 'fleetwatch-cd-writes' with binding "
            f"'fleetwatch-cd-writes' denied request: {validation['message']}"
        )
        assert len(wrapped) <= 300, wrapped
