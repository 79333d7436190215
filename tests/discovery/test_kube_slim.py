"""What an informer keeps of an object (``fleetwatch.kube.objects.slim``), as each caller
asks: discovery's Secrets (the default), the CD kinds (the owners of the pause field) and
Argo CD's cluster Secrets (a few metadata keys, the ``name`` key of the data). Pure."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleetwatch.kube.objects import LAST_APPLIED, slim

SKIP = "argocd.argoproj.io/skip-reconcile"
#: The fields each managedFields entry below owns.
BY_ANNOTATE: dict[str, Any] = {"f:metadata": {"f:annotations": {f"f:{SKIP}": {}}}}
BY_FLUX: dict[str, Any] = {"f:spec": {"f:suspend": {}, "f:interval": {}}}
BY_ARGOCD: dict[str, Any] = {"f:data": {"f:config": {}, "f:name": {}}}


def everything() -> dict[str, Any]:
    """One object with every part a caller keeps or drops."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": "cluster-c1",
            "namespace": "argocd",
            "uid": "u1",
            "resourceVersion": "7",
            "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
            "annotations": {LAST_APPLIED: '{"data": {"config": "Y3JlZA=="}}', "team": "a"},
            "managedFields": [
                {"manager": "kubectl-annotate", "operation": "Update", "fieldsV1": BY_ANNOTATE},
                {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": BY_FLUX},
                {"manager": "argocd-server", "operation": "Update", "fieldsV1": BY_ARGOCD},
            ],
        },
        "spec": {"suspend": False},
        "data": {"name": "YzE=", "config": "Y3JlZA==", "odd": 3},
    }


IDENTITY = {"name": "cluster-c1", "namespace": "argocd", "uid": "u1", "resourceVersion": "7"}
LABELS = {"labels": {"argocd.argoproj.io/secret-type": "cluster"}}
#: What every caller keeps of the annotations: kubectl's last-applied copy dropped.
ANNOTATIONS = {"annotations": {"team": "a"}}
SERVER_SET = {"generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z"}
REST = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "spec": {"suspend": False},
    "data": {"name": "YzE=", "config": "Y3JlZA==", "odd": 3},
}

#: ``metadata`` as every caller keeps it by default
META = {**IDENTITY, **SERVER_SET, **LABELS, **ANNOTATIONS}
#: what ``reactor.cd.clustersecrets`` keeps of an Argo CD cluster Secret's metadata
SECRET_KEYS = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations")
FLUX_OWNED = [{"manager": "kustomize-controller", "fieldsV1": {"f:spec": {"f:suspend": {}}}}]
ANNOTATE_OWNED = [{"manager": "kubectl-annotate", "fieldsV1": BY_ANNOTATE}]

CASES = [
    pytest.param(
        {},
        {**REST, "metadata": META},
        id="discovery-secrets-everything-but-managedFields-and-last-applied",
    ),
    pytest.param(
        {"owners_of_field": ("spec", "suspend")},
        {**REST, "metadata": {**META, "managedFields": FLUX_OWNED}},
        id="flux-owners-of-spec.suspend-alone",
    ),
    pytest.param(
        {"owners_of_field": ("metadata", "annotations", SKIP)},
        {**REST, "metadata": {**META, "managedFields": ANNOTATE_OWNED}},
        id="argocd-application-owners-of-skip-reconcile",
    ),
    pytest.param(
        {"owners_of_field": ("spec", "paused")},
        {**REST, "metadata": META},
        id="a-field-nobody-owns-keeps-no-managedFields",
    ),
    pytest.param(
        {
            "owners_of_field": ("metadata", "annotations", SKIP),
            "metadata_keys": SECRET_KEYS,
            "data_keys": ("name", "odd", "absent"),
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {**IDENTITY, **LABELS, **ANNOTATIONS, "managedFields": ANNOTATE_OWNED},
            "data": {"name": "YzE="},  # no config (credentials), no non-string value
        },
        id="argocd-cluster-secret-identity-owners-and-the-name-key",
    ),
]


@pytest.mark.parametrize(("asked", "expected"), CASES)
def test_what_each_caller_keeps(asked: dict[str, Any], expected: dict[str, Any]) -> None:
    obj = everything()
    kept = slim(obj, **asked)
    assert kept == expected
    assert LAST_APPLIED not in repr(kept)
    assert obj == everything()  # the event's object is not changed in place


def test_the_credentials_of_a_cluster_secret_are_not_kept_anywhere() -> None:
    kept = slim(everything(), metadata_keys=("name", "annotations"), data_keys=("name",))
    assert "Y3JlZA==" not in repr(kept)  # neither in data nor in last-applied's copy


def test_an_object_with_nothing_to_drop_is_kept_as_it_is() -> None:
    plain = {"metadata": {"name": "a", "uid": "u", "annotations": {"team": "a"}}, "data": {}}
    assert slim(plain) is plain
    assert slim(plain, owners_of_field=("spec", "suspend")) is plain
    bare: dict[str, Any] = {"kind": "Secret"}
    assert slim(bare) is bare


@pytest.mark.parametrize("metadata", [None, "not a mapping", ["a"]])
def test_metadata_absent_or_malformed_is_kept_by_default_and_empty_when_narrowed(
    metadata: Any,
) -> None:
    obj = {"kind": "Secret", "metadata": metadata, "data": {"name": "YzE="}}
    before = copy.deepcopy(obj)
    assert slim(obj) is obj
    assert slim(obj, metadata_keys=("name",), data_keys=("name",)) == {
        "kind": "Secret",
        "metadata": {},
        "data": {"name": "YzE="},
    }
    assert obj == before


@pytest.mark.parametrize("data", [None, "not a mapping", {"config": "Y3JlZA=="}])
def test_data_without_a_kept_key_leaves_no_data(data: Any) -> None:
    kept = slim({"kind": "Secret", "metadata": {"name": "a"}, "data": data}, data_keys=("name",))
    assert kept == {"kind": "Secret", "metadata": {"name": "a"}}
