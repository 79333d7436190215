"""kubectl 1.32 against the stand-in management cluster: discovery, get, apply, patch, watch.

kubectl is the reference client here: it negotiates discovery, reads OpenAPI to decide
whether to validate, speaks every patch type and server-side apply, and watches. If it
works unmodified (no ``--validate=false``), the protocol is close to the real one.
"""

from __future__ import annotations

import base64
import json
import signal
from pathlib import Path

import pytest
import yaml

from fleetwatch.standin.management import ManagementSettings, ThreadedManagementCluster
from tests.helpers.standin_management import (
    NS,
    Kubectl,
    Lines,
    application,
    argocd_cluster_secret,
    capi_secret,
    helmrelease,
    kustomization,
    secret,
)

pytestmark = pytest.mark.live


@pytest.fixture
def cluster_settings() -> ManagementSettings:
    """A bookmark every 0.5 s: kubectl's watches here wait for writes, not bookmarks."""
    return ManagementSettings(bookmark_seconds=0.5)


@pytest.fixture
def kubectl(cluster: ThreadedManagementCluster, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster.kubeconfig, tmp_path)


def test_kubectl_lists_cluster_secrets_across_namespaces_by_label(
    cluster: ThreadedManagementCluster, kubectl: Kubectl
) -> None:
    cluster.seed(
        [
            argocd_cluster_secret("prod-eu", "https://127.0.0.1:6443"),
            argocd_cluster_secret("prod-us", "https://127.0.0.2:6443"),
            capi_secret("edge-1", "capi-edge"),
            secret("unrelated", "default", {"team": "a"}),
        ]
    )
    out = kubectl.run(
        "get", "secrets", "-A", "-l", "argocd.argoproj.io/secret-type=cluster", "-o", "json"
    )
    names = [i["metadata"]["name"] for i in json.loads(out)["items"]]
    assert names == ["cluster-prod-eu", "cluster-prod-us"]
    out = kubectl.run("get", "secrets", "-A", "-l", "cluster.x-k8s.io/cluster-name", "-o", "name")
    assert out.split() == ["secret/edge-1-kubeconfig"]
    selector = "argocd.argoproj.io/secret-type notin (cluster),!cluster.x-k8s.io/cluster-name"
    out = kubectl.run("get", "secrets", "-A", "-l", selector, "-o", "name")
    assert out.split() == ["secret/unrelated"]
    typed = kubectl.run(
        "get", "secrets", "-A", "--field-selector", "type=cluster.x-k8s.io/secret", "-o", "name"
    )
    assert typed.split() == ["secret/edge-1-kubeconfig"]


def test_kubectl_gets_the_three_custom_resources_by_name_and_short_name(
    cluster: ThreadedManagementCluster, kubectl: Kubectl
) -> None:
    cluster.seed(
        [kustomization("apps"), helmrelease("podinfo"), application("guestbook", "prod-eu")]
    )
    listed = json.loads(kubectl.run("get", "kustomizations", "-n", NS, "-o", "json"))
    assert listed["kind"] == "List"
    (item,) = listed["items"]
    assert item["spec"]["kubeConfig"]["secretRef"] == {"name": "apps-kubeconfig", "key": "value"}
    assert item["metadata"]["generation"] == 1
    assert kubectl.run("get", "ks", "-n", NS, "-o", "name").split() == [
        "kustomization.kustomize.toolkit.fluxcd.io/apps"
    ]
    assert kubectl.run("get", "hr", "-n", NS, "-o", "name").split() == [
        "helmrelease.helm.toolkit.fluxcd.io/podinfo"
    ]
    app = json.loads(kubectl.run("get", "app", "guestbook", "-n", "argocd", "-o", "json"))
    assert app["spec"]["destination"]["name"] == "prod-eu"
    resources = kubectl.run("api-resources", "--api-group", "kustomize.toolkit.fluxcd.io")
    assert resources.split("\n")[1].split() == [
        "kustomizations",
        "ks",
        "kustomize.toolkit.fluxcd.io/v1",
        "true",
        "Kustomization",
    ]


def test_kubectl_server_side_apply_creates_updates_and_meets_conflicts(
    cluster: ThreadedManagementCluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", NS)
    manifest = tmp_path / "ks.yaml"
    manifest.write_text(yaml.safe_dump(kustomization("apps")))
    assert "serverside-applied" in kubectl.run("apply", "--server-side", "-f", str(manifest))
    manifest.write_text(yaml.safe_dump(kustomization("apps", interval="5m")))
    kubectl.run("apply", "--server-side", "-f", str(manifest))
    live = json.loads(kubectl.run("get", "ks", "apps", "-n", NS, "-o", "json"))
    assert live["spec"]["interval"] == "5m"
    assert live["metadata"]["generation"] == 2
    # Another manager takes a field; applying a different value is a conflict, as for real.
    kubectl.run(
        "patch", "ks", "apps", "-n", NS, "--type", "merge", "-p", '{"spec":{"interval":"1m"}}'
    )
    error = kubectl.fails("apply", "--server-side", "-f", str(manifest))
    assert 'Apply failed with 1 conflict: conflict with "kubectl-patch": .spec.interval' in error
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    live = json.loads(
        kubectl.run("get", "ks", "apps", "-n", NS, "-o", "json", "--show-managed-fields")
    )
    assert live["spec"]["interval"] == "5m"
    managers = {(m["manager"], m["operation"]) for m in live["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers


def test_kubectl_patches_merge_and_json_but_not_strategic_on_a_custom_resource(
    cluster: ThreadedManagementCluster, kubectl: Kubectl
) -> None:
    cluster.seed([kustomization("apps")])
    kubectl.run(
        "patch", "ks", "apps", "-n", NS, "--type", "merge", "-p", '{"spec":{"suspend":true}}'
    )
    assert kubectl.run("get", "ks", "apps", "-n", NS, "-o", "jsonpath={.spec.suspend}") == "true"
    failed_test = '[{"op":"test","path":"/spec/suspend","value":false}]'
    error = kubectl.fails("patch", "ks", "apps", "-n", NS, "--type", "json", "-p", failed_test)
    assert "the server rejected our request due to an error in our request" in error
    resume = (
        '[{"op":"test","path":"/spec/suspend","value":true},'
        '{"op":"replace","path":"/spec/suspend","value":false},'
        '{"op":"add","path":"/metadata/annotations","value":'
        '{"reconcile.fluxcd.io/requestedAt":"2026-12-02T10:00:00Z"}}]'
    )
    kubectl.run("patch", "ks", "apps", "-n", NS, "--type", "json", "-p", resume)
    live = json.loads(kubectl.run("get", "ks", "apps", "-n", NS, "-o", "json"))
    assert live["spec"]["suspend"] is False
    assert live["metadata"]["annotations"] == {
        "reconcile.fluxcd.io/requestedAt": "2026-12-02T10:00:00Z"
    }
    assert live["metadata"]["generation"] == 3  # suspend true, then false: two spec changes
    # kubectl's default patch type is strategic merge, which custom resources refuse.
    error = kubectl.fails("patch", "ks", "apps", "-n", NS, "-p", '{"spec":{"suspend":true}}')
    assert "application/strategic-merge-patch+json is not supported" in error


def test_kubectl_create_secret_label_annotate_and_delete(
    cluster: ThreadedManagementCluster, kubectl: Kubectl
) -> None:
    kubectl.run("create", "namespace", "capi-edge")
    kubectl.run(
        "create",
        "secret",
        "generic",
        "edge-1-kubeconfig",
        "-n",
        "capi-edge",
        "--type",
        "cluster.x-k8s.io/secret",
        "--from-literal=value=apiVersion: v1",
    )
    kubectl.run(
        "label",
        "secret",
        "edge-1-kubeconfig",
        "-n",
        "capi-edge",
        "cluster.x-k8s.io/cluster-name=edge-1",
    )
    kubectl.run(
        "annotate", "secret", "edge-1-kubeconfig", "-n", "capi-edge", "fleetwatch.io/note=seen"
    )
    live = json.loads(
        kubectl.run("get", "secret", "edge-1-kubeconfig", "-n", "capi-edge", "-o", "json")
    )
    assert base64.b64decode(live["data"]["value"]) == b"apiVersion: v1"
    assert live["type"] == "cluster.x-k8s.io/secret"
    assert live["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "edge-1"}
    assert live["metadata"]["annotations"] == {"fleetwatch.io/note": "seen"}
    assert "deleted" in kubectl.run("delete", "secret", "edge-1-kubeconfig", "-n", "capi-edge")
    error = kubectl.fails("get", "secret", "edge-1-kubeconfig", "-n", "capi-edge")
    assert 'secrets "edge-1-kubeconfig" not found' in error
    error = kubectl.fails("create", "secret", "generic", "x", "-n", "nowhere", "--from-literal=a=b")
    assert 'namespaces "nowhere" not found' in error


def test_kubectl_get_watch_prints_each_change(
    cluster: ThreadedManagementCluster, kubectl: Kubectl
) -> None:
    cluster.seed([kustomization("apps")])
    template = 'jsonpath={.type} {.object.metadata.name} {.object.spec.suspend}{"\\n"}'
    watcher = kubectl.start("get", "ks", "-n", NS, "-w", "--output-watch-events", "-o", template)
    try:
        lines = Lines(watcher.stdout)
        assert lines.next() == "ADDED apps "
        kubectl.run(
            "patch", "ks", "apps", "-n", NS, "--type", "merge", "-p", '{"spec":{"suspend":true}}'
        )
        assert lines.next() == "MODIFIED apps true"
        kubectl.run("delete", "ks", "apps", "-n", NS)
        assert lines.next() == "DELETED apps true"
    finally:
        watcher.send_signal(signal.SIGTERM)
        watcher.wait(10)


def test_kubectl_refuses_what_the_schema_refuses(
    cluster: ThreadedManagementCluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", NS)
    broken = kustomization("apps", suspend="yes")
    del broken["spec"]["prune"]
    manifest = tmp_path / "broken.yaml"
    manifest.write_text(yaml.safe_dump(broken))
    error = kubectl.fails("apply", "--server-side", "-f", str(manifest))
    # kubectl renders the 422's details (kind, name, causes) rather than its message.
    assert 'The Kustomization "apps" is invalid' in error
    assert "spec.prune: Required value" in error
    assert 'spec.suspend in body must be of type boolean: "string"' in error


def test_kubectl_dry_run_server_validates_and_changes_nothing(
    cluster: ThreadedManagementCluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    cluster.seed([kustomization("apps")])
    before = cluster.revision
    out = kubectl.run(
        "patch",
        "ks",
        "apps",
        "-n",
        NS,
        "--type",
        "merge",
        "-p",
        '{"spec":{"suspend":true}}',
        "--dry-run=server",
        "-o",
        "json",
    )
    assert json.loads(out)["spec"]["suspend"] is True  # the answer shows the result...
    assert kubectl.run("get", "ks", "apps", "-n", NS, "-o", "jsonpath={.spec.suspend}") == ""
    manifest = tmp_path / "new.yaml"
    manifest.write_text(yaml.safe_dump(kustomization("other")))
    kubectl.run("apply", "--server-side", "--dry-run=server", "-f", str(manifest))
    kubectl.run("delete", "ks", "apps", "-n", NS, "--dry-run=server")
    assert kubectl.run("get", "ks", "-n", NS, "-o", "name").split() == [
        "kustomization.kustomize.toolkit.fluxcd.io/apps"
    ]
    assert cluster.revision == before  # ...and nothing was written


def test_kubectl_writes_status_through_its_subresource_only(
    cluster: ThreadedManagementCluster, kubectl: Kubectl
) -> None:
    cluster.seed([kustomization("apps")])
    ready = '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}'
    kubectl.run(
        "patch", "ks", "apps", "-n", NS, "--subresource=status", "--type", "merge", "-p", ready
    )
    # A status in a write to the object itself is ignored, as with a status subresource.
    kubectl.run("patch", "ks", "apps", "-n", NS, "--type", "merge", "-p", '{"status":null}')
    live = json.loads(kubectl.run("get", "ks", "apps", "-n", NS, "-o", "json"))
    assert live["status"]["conditions"][0]["type"] == "Ready"
    assert live["metadata"]["generation"] == 1


def test_kubectl_prints_the_server_side_columns(
    cluster: ThreadedManagementCluster, kubectl: Kubectl
) -> None:
    cluster.seed([capi_secret("edge-1", "capi-edge"), kustomization("apps")])
    ready = '{"status":{"conditions":[{"type":"Ready","status":"False","message":"suspended"}]}}'
    kubectl.run(
        "patch", "ks", "apps", "-n", NS, "--subresource=status", "--type", "merge", "-p", ready
    )
    secrets = kubectl.run("get", "secrets", "-A").splitlines()
    assert secrets[0].split() == ["NAMESPACE", "NAME", "TYPE", "DATA", "AGE"]
    assert secrets[1].split()[:4] == [
        "capi-edge",
        "edge-1-kubeconfig",
        "cluster.x-k8s.io/secret",
        "1",
    ]
    kustomizations = kubectl.run("get", "ks", "-n", NS).splitlines()
    assert kustomizations[0].split() == ["NAME", "AGE", "READY", "STATUS"]
    assert kustomizations[1].split()[2:] == ["False", "suspended"]


def test_kubectl_apply_refuses_a_misspelt_top_level_field(
    cluster: ThreadedManagementCluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", NS)
    typo = kustomization("apps")
    typo["spce"] = typo.pop("spec")
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(yaml.safe_dump(typo))
    error = kubectl.fails("create", "-f", str(manifest))  # kubectl sends fieldValidation=Strict
    assert 'strict decoding error: unknown field "spce"' in error
