"""The management stand-in's rules as pure functions: selectors, patches, ownership, store.

No server: these pin the semantics the protocol tests rely on, one table per rule.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleetwatch.standin.management.auth import RbacRule, Tokens
from fleetwatch.standin.management.fields import Ownership, fields_v1
from fleetwatch.standin.management.kinds import BY_PATH, NAMESPACES, SECRETS
from fleetwatch.standin.management.patches import PatchFailed, json_patch, merge_patch
from fleetwatch.standin.management.selectors import field_selector, label_selector
from fleetwatch.standin.management.status import ApiError
from fleetwatch.standin.management.store import ObjectStore
from tests.helpers.standin_management import NS, kustomization, secret

KUSTOMIZATIONS = BY_PATH[("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")]


def labelled(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "n", "labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("", {}, True),
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),  # != matches objects without the label
        ("a in (1, 2)", {"a": "2"}, True),
        ("a notin (1,2)", {}, True),
        ("a notin (1,2)", {"a": "1"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a,b=2", {"a": "1", "b": "2"}, True),
        ("a in (1,2),b", {"a": "1"}, False),
        ("n>3", {"n": "4"}, True),
        ("n<3", {"n": "4"}, False),
        ("example.com/role=", {"example.com/role": ""}, True),
    ],
)
def test_label_selectors_match_as_kubernetes_labels_do(
    selector: str, labels: dict[str, str], matches: bool
) -> None:
    assert label_selector(selector)(labelled(**labels)) is matches


@pytest.mark.parametrize("selector", ["a in 1", "a=b c", "=x", "a in (b c)", "n>x"])
def test_bad_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(ApiError) as refused:
        label_selector(selector)
    assert (refused.value.code, refused.value.reason) == (400, "BadRequest")


def test_field_selectors_take_name_namespace_and_the_kind_own_fields() -> None:
    obj = {"metadata": {"name": "s", "namespace": "n"}, "type": "Opaque"}
    assert field_selector("metadata.name=s,metadata.namespace!=m")(obj)
    assert field_selector("type==Opaque", frozenset({"type"}))(obj)
    with pytest.raises(ApiError, match="field label not supported: type"):
        field_selector("type=Opaque")


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        ({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}}, {"a": 1, "b": {"d": 3}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": 1}, {"a": None, "z": None}, {}),
    ],
)
def test_merge_patch_is_rfc_7386(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


@pytest.mark.parametrize(
    ("operations", "result"),
    [
        ([{"op": "add", "path": "/l/-", "value": 3}], {"a": {"b": 1}, "l": [1, 2, 3]}),
        ([{"op": "add", "path": "/l/0", "value": 0}], {"a": {"b": 1}, "l": [0, 1, 2]}),
        ([{"op": "replace", "path": "/a/b", "value": 2}], {"a": {"b": 2}, "l": [1, 2]}),
        ([{"op": "remove", "path": "/l/1"}], {"a": {"b": 1}, "l": [1]}),
        ([{"op": "move", "from": "/a/b", "path": "/c"}], {"a": {}, "l": [1, 2], "c": 1}),
        ([{"op": "copy", "from": "/a", "path": "/d"}], {"a": {"b": 1}, "l": [1, 2], "d": {"b": 1}}),
        ([{"op": "test", "path": "/a/b", "value": 1}], {"a": {"b": 1}, "l": [1, 2]}),
        ([{"op": "add", "path": "/a~1b", "value": 1}], {"a": {"b": 1}, "l": [1, 2], "a/b": 1}),
    ],
)
def test_json_patch_is_rfc_6902(operations: list[dict[str, Any]], result: Any) -> None:
    assert json_patch({"a": {"b": 1}, "l": [1, 2]}, operations) == result


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        ([{"op": "test", "path": "/a/b", "value": 2}], "testing value /a/b failed: test failed"),
        ([{"op": "remove", "path": "/x"}], 'doc is missing path: "/x"'),
        ([{"op": "replace", "path": "/x", "value": 1}], 'doc is missing key: "/x"'),
        (
            [
                {"op": "replace", "path": "/a/b", "value": 9},
                {"op": "test", "path": "/l/0", "value": 0},
            ],
            "testing value /l/0 failed",
        ),
    ],
)
def test_a_json_patch_that_does_not_apply_fails_whole(
    operations: list[dict[str, Any]], message: str
) -> None:
    document = {"a": {"b": 1}, "l": [1, 2]}
    with pytest.raises(PatchFailed, match=message):
        json_patch(document, operations)
    assert document == {"a": {"b": 1}, "l": [1, 2]}  # untouched


def test_an_apply_removes_the_fields_its_manager_no_longer_sets() -> None:
    owners = Ownership()
    first = {"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}, "spec": {"x": 1, "y": 2}}
    live = owners.apply(None, first, "ci", force=False)
    second = {"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"x": 1}}
    live = owners.apply(live, second, "ci", force=False)
    assert live == second
    assert fields_v1(owners.entries[0].paths) == {
        "f:metadata": {"f:labels": {"f:a": {}}},
        "f:spec": {"f:x": {}},
    }


def test_an_apply_keeps_a_field_another_manager_also_owns() -> None:
    owners = Ownership()
    live = owners.apply(None, {"metadata": {"name": "x"}, "spec": {"x": 1}}, "ci", force=False)
    owners.apply(live, {"metadata": {"name": "x"}, "spec": {"x": 1}}, "flux", force=False)
    live = owners.apply(live, {"metadata": {"name": "x"}, "spec": {}}, "ci", force=False)
    assert live["spec"] == {"x": 1}  # flux still applies it


def test_an_apply_conflicts_with_an_update_unless_forced() -> None:
    owners = Ownership()
    applied = {"metadata": {"name": "x"}, "spec": {"suspend": False}}
    live = owners.apply(None, applied, "flux", force=False)
    patched = {**live, "spec": {"suspend": True}}
    owners.record_update(live, patched, "fleetwatch", "v1")
    with pytest.raises(ApiError) as conflict:
        owners.apply(patched, applied, "flux", force=False)
    assert conflict.value.code == 409
    assert conflict.value.message == (
        'Apply failed with 1 conflict: conflict with "fleetwatch": .spec.suspend'
    )
    assert owners.apply(patched, applied, "flux", force=True)["spec"] == {"suspend": False}


def test_writes_take_the_next_global_revision_and_no_ops_take_none() -> None:
    store = ObjectStore()
    start = store.revision
    store.create(SECRETS, "default", secret("a", "default"), "test")
    created = store.create(KUSTOMIZATIONS, "default", kustomization("k", "default"), "test")
    assert created["metadata"]["resourceVersion"] == str(start + 2)
    again = store.update(KUSTOMIZATIONS, "default", "k", created, "test")
    assert again["metadata"]["resourceVersion"] == str(start + 2)  # nothing changed
    changed = store.update(
        KUSTOMIZATIONS,
        "default",
        "k",
        {**created, "spec": {**created["spec"], "suspend": True}},
        "test",
    )
    assert (changed["metadata"]["resourceVersion"], changed["metadata"]["generation"]) == (
        str(start + 3),
        2,
    )


def test_a_list_at_an_older_revision_is_rebuilt_from_the_history() -> None:
    store = ObjectStore()
    store.create(SECRETS, "default", secret("a", "default"), "test")
    before = store.revision
    store.create(SECRETS, "default", secret("b", "default"), "test")
    store.delete(SECRETS, "default", "a")
    assert [
        o["metadata"]["name"] for o in store.items(SECRETS, "default", lambda o: True, before)
    ] == ["a"]
    assert [o["metadata"]["name"] for o in store.items(SECRETS, "default", lambda o: True)] == ["b"]


def test_pages_follow_etcd_key_order_and_hold_every_object_once() -> None:
    """``a-b/x`` sorts before ``a/x`` in etcd (``-`` before ``/``): a page after ``a/x``
    must not lose it, as a (namespace, name) order would."""
    store = ObjectStore()
    for namespace, name in (("a", "x"), ("a-b", "y"), ("a", "z"), ("b", "w")):
        store.apply(NAMESPACES, "", namespace, {"metadata": {"name": namespace}}, "test", True)
        store.create(SECRETS, namespace, secret(name, namespace), "test")
    seen: list[str] = []
    after = ""
    while True:
        page, more = store.page(SECRETS, "", lambda o: True, after=after, limit=1)
        meta = page[0]["metadata"]
        after = f"{meta['namespace']}/{meta['name']}"
        seen.append(after)
        assert more == 4 - len(seen)
        if not more:
            break
    assert seen == ["a-b/y", "a/x", "a/z", "b/w"]


def test_a_namespace_page_holds_that_namespace_only_and_the_order_follows_new_keys() -> None:
    """The kind's key order is kept between pages: a Secret created or deleted since must
    still show or vanish, and ``a-b`` (whose keys sort between ``a``'s) stays out of
    ``a``'s pages."""
    store = ObjectStore()
    for namespace in ("a", "a-b"):
        store.apply(NAMESPACES, "", namespace, {"metadata": {"name": namespace}}, "test", True)
    for namespace, name in (("a", "x"), ("a-b", "y"), ("a", "z")):
        store.create(SECRETS, namespace, secret(name, namespace), "test")

    def names(namespace: str) -> list[str]:
        return [o["metadata"]["name"] for o in store.page(SECRETS, namespace, lambda o: True)[0]]

    assert names("a") == ["x", "z"]
    store.create(SECRETS, "a", secret("m", "a"), "test")
    store.delete(SECRETS, "a", "x")
    assert names("a") == ["m", "z"]
    assert names("a-b") == ["y"]
    assert names("") == ["y", "m", "z"]


def test_a_selected_page_only_says_whether_more_match() -> None:
    """With a selector the API server gives no ``remainingItemCount``: the page stops at
    the first match past the limit instead of matching the rest of the kind."""
    store = ObjectStore()
    for name in ("a", "b", "c", "d"):
        store.create(SECRETS, "default", secret(name, "default"), "test")
    matched: list[str] = []

    def predicate(obj: dict[str, Any]) -> bool:
        matched.append(obj["metadata"]["name"])
        return True

    page, more = store.page(SECRETS, "default", predicate, limit=1, count_more=False)
    assert ([o["metadata"]["name"] for o in page], more, matched) == (["a"], 1, ["a", "b"])
    assert store.page(SECRETS, "default", lambda o: True, limit=1)[1] == 3


def test_a_page_is_a_copy() -> None:
    store = ObjectStore()
    store.create(SECRETS, "default", secret("a", "default"), "test")
    store.page(SECRETS, "default", lambda o: True)[0][0]["metadata"]["name"] = "changed"
    assert store.get(SECRETS, "default", "a")["metadata"]["name"] == "a"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"spec": {"interval": 5}}, 'spec.interval in body must be of type string: "integer"'),
        ({"spec": {"suspend": "true"}}, "spec.suspend in body must be of type boolean"),
        (
            {"spec": {"kubeConfig": {"secretRef": {}}}},
            "spec.kubeConfig.secretRef.name: Required value",
        ),
        ({"metadata": {"name": "Bad_Name"}}, 'metadata.name: Invalid value: "Bad_Name"'),
        ({"metadata": {"labels": {"a": "b c"}}}, 'metadata.labels: Invalid value: "b c"'),
    ],
)
def test_invalid_kustomizations_are_422_with_the_field(
    change: dict[str, Any], message: str
) -> None:
    store = ObjectStore()
    obj = kustomization("k", "default")
    for part, values in change.items():
        obj[part] = {**obj[part], **values}
    with pytest.raises(ApiError) as refused:
        store.create(KUSTOMIZATIONS, "default", obj, "test")
    assert (refused.value.code, refused.value.reason) == (422, "Invalid")
    assert message in refused.value.message


def test_string_data_is_folded_into_base64_data_and_type_is_immutable() -> None:
    store = ObjectStore()
    created = store.create(
        SECRETS, "default", {**secret("s", "default"), "data": {"k": "YQ=="}}, "t"
    )
    assert created["data"] == {"k": "YQ==", "value": "eA=="} and "stringData" not in created
    with pytest.raises(ApiError, match="field is immutable"):
        store.update(SECRETS, "default", "s", {**created, "type": "kubernetes.io/tls"}, "t")
    with pytest.raises(ApiError, match="illegal base64 data"):
        store.create(SECRETS, "default", {**secret("t", "default"), "data": {"k": "%%"}}, "t")


def test_an_object_with_finalizers_is_only_marked_until_they_are_gone() -> None:
    store = ObjectStore()
    obj = kustomization("k", "default")
    obj["metadata"]["finalizers"] = ["finalizers.fluxcd.io"]
    store.create(KUSTOMIZATIONS, "default", obj, "t")
    marked, gone = store.delete(KUSTOMIZATIONS, "default", "k")
    assert not gone and marked["metadata"]["deletionTimestamp"]
    marked["metadata"]["finalizers"] = []
    store.update(KUSTOMIZATIONS, "default", "k", marked, "flux")
    assert not store.exists(KUSTOMIZATIONS, "default", "k")


def test_objects_need_their_namespace_and_a_namespace_takes_its_objects_along() -> None:
    store = ObjectStore()
    with pytest.raises(ApiError, match='namespaces "flux-system" not found'):
        store.create(KUSTOMIZATIONS, NS, kustomization("k"), "t")
    store.create(BY_PATH[("", "v1", "namespaces")], "", {"metadata": {"name": NS}}, "t")
    store.create(KUSTOMIZATIONS, NS, kustomization("k"), "t")
    store.delete(BY_PATH[("", "v1", "namespaces")], "", NS)
    assert not store.exists(KUSTOMIZATIONS, NS, "k")


def test_a_status_subresource_kind_drops_status_written_to_the_object() -> None:
    store = ObjectStore()
    obj = {**kustomization("k", "default"), "status": {"observedGeneration": 7}}
    created = store.create(KUSTOMIZATIONS, "default", obj, "t")
    assert "status" not in created
    with_status = store.update(
        KUSTOMIZATIONS,
        "default",
        "k",
        {**created, "status": {"a": 1}},
        "flux",
        subresource="status",
    )
    assert with_status["status"] == {"a": 1}
    again = store.update(KUSTOMIZATIONS, "default", "k", {**with_status, "status": {"a": 2}}, "t")
    assert again["status"] == {"a": 1} and again["metadata"]["generation"] == 1


def test_a_token_of_rbac_rules_is_allowed_what_one_of_its_rules_allows() -> None:
    """As RBAC unions the rules of every binding: patch on Secrets in ``argocd`` only, list
    of Kustomizations everywhere; anything else 403."""
    tokens = Tokens()
    token = tokens.issue(
        "reactor",
        rules=[
            RbacRule(frozenset({"patch"}), frozenset({"secrets"}), frozenset({"argocd"})),
            RbacRule(frozenset({"list", "watch"}), frozenset({KUSTOMIZATIONS.key})),
        ],
    )
    grant = tokens.grant(f"Bearer {token}")
    assert grant is not None
    grant.check(SECRETS, "patch", "argocd", "cluster-a")
    grant.check(KUSTOMIZATIONS, "list", "", "")  # cluster-wide: a ClusterRoleBinding's
    grant.check(KUSTOMIZATIONS, "watch", "team-a", "")
    for kind, verb, namespace in (
        (SECRETS, "patch", "team-a"),
        (SECRETS, "list", "argocd"),
        (SECRETS, "patch", ""),
        (KUSTOMIZATIONS, "patch", "team-a"),
    ):
        with pytest.raises(ApiError) as refused:
            grant.check(kind, verb, namespace, "x")
        assert refused.value.code == 403


def test_a_rule_with_resource_names_allows_those_objects_only_and_never_a_create() -> None:
    """``resourceNames`` as kube-apiserver's authorizer reads them: the named object only; a
    request without a name (a create, a list) is never one of them."""
    leases = BY_PATH[("coordination.k8s.io", "v1", "leases")]
    tokens = Tokens()
    token = tokens.issue(
        "reactor",
        rules=[
            RbacRule(frozenset({"create"}), frozenset({leases.key}), frozenset({"fleetwatch"})),
            RbacRule(
                frozenset({"get", "update", "patch"}),
                frozenset({leases.key}),
                frozenset({"fleetwatch"}),
                frozenset({"fleetwatch-reactor-cd"}),
            ),
        ],
    )
    grant = tokens.grant(f"Bearer {token}")
    assert grant is not None
    grant.check(leases, "create", "fleetwatch", "")
    for verb in ("get", "update", "patch"):
        grant.check(leases, verb, "fleetwatch", "fleetwatch-reactor-cd")
    for verb, name in (("get", "another-lease"), ("update", "another-lease"), ("list", "")):
        with pytest.raises(ApiError) as refused:
            grant.check(leases, verb, "fleetwatch", name)
        assert refused.value.code == 403
    names_only = RbacRule(
        frozenset({"create"}), frozenset({leases.key}), names=frozenset({"fleetwatch-reactor-cd"})
    )
    assert not names_only.allows(leases, "create", "fleetwatch", "")
