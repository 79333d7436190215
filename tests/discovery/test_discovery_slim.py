"""What the informer keeps of each object (``fleetwatch.kube.informer.slim``): pure."""

from __future__ import annotations

import copy

from fleetwatch.kube.informer import slim
from fleetwatch.kube.objects import LAST_APPLIED


def test_managed_fields_and_the_last_applied_copy_are_not_kept() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "cluster-prod",
            "namespace": "argocd",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
            "annotations": {LAST_APPLIED: '{"data": {"config": "c2VjcmV0"}}', "team": "a"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}],
        },
        "data": {"config": "c2VjcmV0"},
    }
    before = copy.deepcopy(secret)
    kept = slim(secret)
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["annotations"] == {"team": "a"}
    assert kept["data"] == before["data"]
    assert {k: kept["metadata"][k] for k in ("name", "uid", "resourceVersion", "labels")} == {
        k: before["metadata"][k] for k in ("name", "uid", "resourceVersion", "labels")
    }
    assert secret == before  # the event's object is not changed in place


def test_an_object_without_them_is_kept_as_it_is() -> None:
    plain = {"metadata": {"name": "a", "uid": "u"}, "data": {}}
    assert slim(plain) is plain
