"""The official kubernetes Python client against the stand-in management cluster.

What fleetwatch's discovery and reactor rely on, seen through the client most people
would use: selectors, list resourceVersions, watches (events, bookmarks, 410 after a
compaction), custom objects, optimistic concurrency, and RBAC-shaped 401/403.
"""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from fleetwatch.procs import wait_until
from fleetwatch.standin.management import ThreadedManagementCluster
from tests.helpers.kube_status import UNAUTHORIZED
from tests.helpers.standin_management import (
    NS,
    api_client,
    application,
    argocd_cluster_secret,
    capi_secret,
    helmrelease,
    kustomization,
    secret,
)

pytestmark = pytest.mark.live

CRS = [
    ("kustomize.toolkit.fluxcd.io", "v1", NS, "kustomizations", "apps"),
    ("helm.toolkit.fluxcd.io", "v2", NS, "helmreleases", "podinfo"),
    ("argoproj.io", "v1alpha1", "argocd", "applications", "guestbook"),
]


@pytest.fixture
def cluster_seed() -> list[dict[str, Any]]:
    """One of each kind the client reads: cluster secrets, a plain one, three custom objects."""
    return [
        argocd_cluster_secret("prod-eu", "https://127.0.0.1:6443"),
        capi_secret("edge-1", "capi-edge"),
        capi_secret("edge-2", "capi-edge"),
        secret("plain", "capi-edge", {"team": "a"}),
        kustomization("apps"),
        helmrelease("podinfo"),
        application("guestbook", "prod-eu"),
    ]


@pytest.fixture
def core(cluster: ThreadedManagementCluster, tmp_path: Path) -> client.CoreV1Api:
    return client.CoreV1Api(api_client(cluster, tmp_path / "admin.kubeconfig"))


def names(listed: Any) -> list[str]:
    return [item.metadata.name for item in listed.items]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("cluster.x-k8s.io/cluster-name", ["edge-1-kubeconfig", "edge-2-kubeconfig"]),
        ("cluster.x-k8s.io/cluster-name=edge-1", ["edge-1-kubeconfig"]),
        ("cluster.x-k8s.io/cluster-name!=edge-1", ["edge-2-kubeconfig", "plain"]),
        ("cluster.x-k8s.io/cluster-name in (edge-2, edge-9)", ["edge-2-kubeconfig"]),
        ("cluster.x-k8s.io/cluster-name notin (edge-2)", ["edge-1-kubeconfig", "plain"]),
        ("!cluster.x-k8s.io/cluster-name,team=a", ["plain"]),
    ],
)
def test_namespaced_secrets_are_listed_by_label_selector(
    core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    assert names(core.list_namespaced_secret("capi-edge", label_selector=selector)) == expected


def test_secrets_of_all_namespaces_by_label_and_field_selector(core: client.CoreV1Api) -> None:
    argo = core.list_secret_for_all_namespaces(
        label_selector="argocd.argoproj.io/secret-type=cluster"
    )
    assert [(s.metadata.namespace, s.metadata.name) for s in argo.items] == [
        ("argocd", "cluster-prod-eu")
    ]
    assert argo.items[0].data["server"] == "aHR0cHM6Ly8xMjcuMC4wLjE6NjQ0Mw=="  # base64, as stored
    typed = core.list_secret_for_all_namespaces(field_selector="type=cluster.x-k8s.io/secret")
    assert names(typed) == ["edge-1-kubeconfig", "edge-2-kubeconfig"]
    one = core.list_secret_for_all_namespaces(
        field_selector="metadata.namespace=capi-edge,metadata.name!=plain"
    )
    assert names(one) == ["edge-1-kubeconfig", "edge-2-kubeconfig"]
    with pytest.raises(ApiException) as refused:
        core.list_secret_for_all_namespaces(field_selector="spec.x=y")
    assert refused.value.status == 400
    assert "field label not supported: spec.x" in refused.value.body


def test_a_list_is_paged_at_one_resource_version(core: client.CoreV1Api) -> None:
    first = core.list_secret_for_all_namespaces(limit=2)
    assert len(first.items) == 2 and first.metadata._continue
    assert first.metadata.remaining_item_count == 2
    core.create_namespaced_secret("capi-edge", secret("zz-late", "capi-edge"))
    rest = core.list_secret_for_all_namespaces(limit=10, _continue=first.metadata._continue)
    assert rest.metadata.resource_version == first.metadata.resource_version
    assert len(rest.items) == 2 and not rest.metadata._continue  # the late one is not there


def test_watch_replays_added_modified_deleted_then_bookmarks(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_secret("capi-edge").metadata.resource_version
    core.create_namespaced_secret("capi-edge", secret("new", "capi-edge"))
    core.patch_namespaced_secret("new", "capi-edge", {"metadata": {"labels": {"x": "y"}}})
    core.delete_namespaced_secret("new", "capi-edge")
    seen: list[tuple[str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_secret,
        "capi-edge",
        resource_version=start,
        allow_watch_bookmarks=True,
        timeout_seconds=10,
    ):
        if event["type"] == "BOOKMARK":
            bookmark = event["raw_object"]
            assert bookmark["kind"] == "Secret" and set(bookmark["metadata"]) >= {"resourceVersion"}
            seen.append(("BOOKMARK", bookmark["metadata"]["resourceVersion"]))
            stream.stop()
        else:
            seen.append((event["type"], event["object"].metadata.name))
    assert seen[:3] == [("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "new")]
    assert seen[3][0] == "BOOKMARK" and int(seen[3][1]) >= int(start) + 3
    assert stream.resource_version == seen[3][1]  # the client resumes from the bookmark


def test_watch_delivers_a_live_change_and_ends_at_its_timeout(
    cluster: ThreadedManagementCluster, core: client.CoreV1Api
) -> None:
    events: queue.Queue[tuple[str, str] | None] = queue.Queue()
    start = core.list_namespaced_secret("capi-edge").metadata.resource_version

    def consume() -> None:
        for event in watch.Watch().stream(
            core.list_namespaced_secret, "capi-edge", resource_version=start, timeout_seconds=2
        ):
            events.put((event["type"], event["object"].metadata.name))
        events.put(None)  # the server ended the stream at timeoutSeconds

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    deadline_poll(lambda: cluster.open_watches() == 1)
    core.patch_namespaced_secret("plain", "capi-edge", {"metadata": {"labels": {"team": "b"}}})
    assert events.get(timeout=5) == ("MODIFIED", "plain")
    assert events.get(timeout=5) is None
    thread.join(5)


def deadline_poll(predicate: Any, seconds: float = 5.0) -> None:
    wait_until(predicate, seconds, interval=0.02)


def test_watch_from_before_a_compaction_raises_410(
    cluster: ThreadedManagementCluster, core: client.CoreV1Api
) -> None:
    old = core.list_namespaced_secret("capi-edge").metadata.resource_version
    core.patch_namespaced_secret("plain", "capi-edge", {"metadata": {"labels": {"team": "c"}}})
    cluster.compact()
    with pytest.raises(ApiException) as gone:
        for _ in watch.Watch().stream(
            core.list_namespaced_secret, "capi-edge", resource_version=old, timeout_seconds=5
        ):
            pass
    assert gone.value.status == 410
    assert "Expired: too old resource version" in gone.value.reason
    # A list with resourceVersionMatch=Exact at that version is refused the same way.
    with pytest.raises(ApiException) as listed:
        core.list_namespaced_secret(
            "capi-edge", resource_version=old, resource_version_match="Exact"
        )
    assert listed.value.status == 410


@pytest.mark.parametrize(("group", "version", "namespace", "plural", "name"), CRS)
def test_custom_objects_get_list_and_merge_patch(
    cluster: ThreadedManagementCluster,
    tmp_path: Path,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
) -> None:
    custom = client.CustomObjectsApi(api_client(cluster, tmp_path / "admin.kubeconfig"))
    got = custom.get_namespaced_custom_object(group, version, namespace, plural, name)
    listed = custom.list_namespaced_custom_object(group, version, namespace, plural)
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]
    assert listed["items"][0]["apiVersion"] == f"{group}/{version}"  # unstructured items keep it
    everywhere = custom.list_cluster_custom_object(group, version, plural)
    assert len(everywhere["items"]) == 1
    mark = {"metadata": {"annotations": {"fleetwatch.io/paused-by-outage": "42"}}}
    patched = custom.patch_namespaced_custom_object(group, version, namespace, plural, name, mark)
    assert patched["metadata"]["annotations"] == {"fleetwatch.io/paused-by-outage": "42"}
    assert int(patched["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    assert patched["metadata"]["generation"] == 1  # metadata is not spec


def test_stale_resource_version_is_a_409_conflict(
    cluster: ThreadedManagementCluster, tmp_path: Path, core: client.CoreV1Api
) -> None:
    stale = core.read_namespaced_secret("plain", "capi-edge")
    core.patch_namespaced_secret("plain", "capi-edge", {"metadata": {"labels": {"team": "d"}}})
    with pytest.raises(ApiException) as put:
        core.replace_namespaced_secret("plain", "capi-edge", stale)
    assert put.value.status == 409
    assert "the object has been modified" in put.value.body
    custom = client.CustomObjectsApi(api_client(cluster, tmp_path / "admin.kubeconfig"))
    ks = custom.get_namespaced_custom_object(*CRS[0][:4], "apps")
    body = {"metadata": {"resourceVersion": "1"}, "spec": {"suspend": True}}
    with pytest.raises(ApiException) as patch:
        custom.patch_namespaced_custom_object(*CRS[0][:4], "apps", body)
    assert patch.value.status == 409
    body["metadata"]["resourceVersion"] = ks["metadata"]["resourceVersion"]
    paused = custom.patch_namespaced_custom_object(*CRS[0][:4], "apps", body)
    assert paused["spec"]["suspend"] is True and paused["metadata"]["generation"] == 2


def test_a_token_bound_to_namespaces_gets_403_elsewhere(
    cluster: ThreadedManagementCluster, tmp_path: Path
) -> None:
    token = cluster.issue_token("system:serviceaccount:fleetwatch:reader", namespaces=["capi-edge"])
    core = client.CoreV1Api(api_client(cluster, tmp_path / "reader.kubeconfig", token))
    assert names(core.list_namespaced_secret("capi-edge")) == [
        "edge-1-kubeconfig",
        "edge-2-kubeconfig",
        "plain",
    ]
    with pytest.raises(ApiException) as other:
        core.list_namespaced_secret("argocd")
    assert other.value.status == 403
    status = json.loads(other.value.body)
    assert status["message"] == (
        'secrets is forbidden: User "system:serviceaccount:fleetwatch:reader" cannot list '
        'resource "secrets" in API group "" in the namespace "argocd"'
    )
    assert (status["kind"], status["status"], status["reason"]) == (
        "Status",
        "Failure",
        "Forbidden",
    )
    with pytest.raises(ApiException) as cluster_wide:
        core.list_secret_for_all_namespaces()
    assert cluster_wide.value.status == 403 and "at the cluster scope" in cluster_wide.value.body


@pytest.mark.parametrize("token", ["", "not-a-token"])
def test_no_or_a_wrong_token_gets_401(
    cluster: ThreadedManagementCluster, tmp_path: Path, token: str
) -> None:
    kubeconfig = tmp_path / "anon.kubeconfig"
    cluster.write_kubeconfig(kubeconfig, token or "placeholder")
    if not token:
        kubeconfig.write_text(kubeconfig.read_text().replace("token: placeholder", "{}"))
        kubeconfig.write_text(kubeconfig.read_text().replace("user:\n    {}", "user: {}"))
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    with pytest.raises(ApiException) as denied:
        core.list_namespaced_secret("capi-edge")
    assert denied.value.status == 401
    assert json.loads(denied.value.body) == UNAUTHORIZED


def test_a_selector_watch_sees_objects_enter_and_leave_its_set(core: client.CoreV1Api) -> None:
    start = core.list_secret_for_all_namespaces().metadata.resource_version
    core.patch_namespaced_secret(
        "plain", "capi-edge", {"metadata": {"labels": {"fleetwatch.io/kubeconfig": "1"}}}
    )
    core.patch_namespaced_secret("plain", "capi-edge", {"metadata": {"labels": {"team": "z"}}})
    core.patch_namespaced_secret(
        "plain", "capi-edge", {"metadata": {"labels": {"fleetwatch.io/kubeconfig": None}}}
    )
    seen = [
        (e["type"], e["object"].metadata.labels.get("fleetwatch.io/kubeconfig"))
        for e in watch.Watch().stream(
            core.list_secret_for_all_namespaces,
            label_selector="fleetwatch.io/kubeconfig",
            resource_version=start,
            timeout_seconds=1,
        )
    ]
    # Leaving the selector arrives as DELETED, holding the object's new state: it still exists.
    assert seen == [("ADDED", "1"), ("MODIFIED", "1"), ("DELETED", None)]
    assert core.read_namespaced_secret("plain", "capi-edge").metadata.name == "plain"


def test_leader_election_leases_are_guarded_by_resource_version(
    cluster: ThreadedManagementCluster, tmp_path: Path
) -> None:
    leases = client.CoordinationV1Api(api_client(cluster, tmp_path / "admin.kubeconfig"))
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="fleetwatch-reactor", namespace="default"),
        spec=client.V1LeaseSpec(holder_identity="replica-a", lease_duration_seconds=15),
    )
    held = leases.create_namespaced_lease("default", body)
    held.spec.holder_identity = "replica-b"
    taken = leases.replace_namespaced_lease("fleetwatch-reactor", "default", held)
    assert taken.spec.holder_identity == "replica-b"
    held.spec.holder_identity = "replica-c"  # still at the version replica-b replaced
    with pytest.raises(ApiException) as lost:
        leases.replace_namespaced_lease("fleetwatch-reactor", "default", held)
    assert lost.value.status == 409
