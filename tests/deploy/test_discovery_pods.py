"""The exporter pods of overlays/argocd and overlays/cluster-api, run against a management
cluster whose RBAC is the rendered one.

The stand-in management cluster holds one Secret of each kind, each for a stand-in workload
cluster: Argo CD's (namespace ``argocd``), Cluster API's (``team-a``) and a labelled one
(``fleet``, as docs/exporter.md's how-to makes it). The exporter's pod runs in the image as
its manifest says (deploy_pods.py), with what the kubelet gives it: the API's address in
its environment and, since its template mounts it, its service account's token. That token
is issued by the stand-in with exactly what the overlay's Roles or ClusterRole grant that
service account (verbs, resources, namespaces), so a flag asking for more than the RBAC
grants is refused as a real API server would refuse it, and the last test shows it is.

One change to the manifests: ``CLUSTER_HEALTH_INTERVAL`` (300 s) is 3 s here, so the
clusters the first list brings are probed within seconds (the first cycle starts with the
process, before the list has answered).
"""

from __future__ import annotations

import base64
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.procs import wait_until
from fleetwatch.standin import ThreadedFleet
from fleetwatch.standin.management import ManagementSettings, ThreadedManagementCluster
from tests.helpers.deploy_image import Container, probed_ok
from tests.helpers.deploy_manifests import NAMESPACE_FLAG, Obj, args_of, find, of_kind, render
from tests.helpers.deploy_pods import ApiServer, pod_of
from tests.helpers.discovery_informer import api_secret, argocd_cluster
from tests.helpers.quiet_http import fetch

# The first test builds the image (tests/deploy/conftest.py), minutes on a fresh machine.
pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

EXPORTER = "fleetwatch-exporter"
#: cluster -> the namespace of the Secret that names it
SECRETS_AT = {"argo-one": "argocd", "capi-one": "team-a", "own-one": "fleet"}


@dataclass
class Management:
    api: ThreadedManagementCluster
    tokens: list[str]
    root: Path


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _secrets(fleet: ThreadedFleet, root: Path) -> list[dict[str, Any]]:
    argo = fleet.cluster("argo-one")
    ca = fleet.fleet.certs.ca_pem
    config = {"bearerToken": argo.token, "tlsClientConfig": {"caData": _b64(ca)}}

    def kubeconfig(name: str) -> str:
        return fleet.write_kubeconfig(root / f"{name}.yaml", [name]).read_text()

    return [
        argocd_cluster("argo-one", argo.url, config),
        api_secret(
            "capi-one-kubeconfig",
            "team-a",
            {"cluster.x-k8s.io/cluster-name": "capi-one"},
            {"value": kubeconfig("capi-one")},
            type_="cluster.x-k8s.io/secret",
        ),
        api_secret(
            "own-one",
            "fleet",
            {"fleetwatch.io/kubeconfig": ""},
            {"kubeconfig": kubeconfig("own-one")},
        ),
    ]


@pytest.fixture(scope="module")
def management() -> Iterator[tuple[ThreadedFleet, Management]]:
    root = Path(tempfile.mkdtemp(prefix="fleetwatch-rbac-"))
    root.chmod(0o755)
    try:
        with (
            ThreadedFleet(root / "fleet") as fleet,
            ThreadedManagementCluster(
                root / "mgmt", ManagementSettings(bookmark_seconds=1.0)
            ) as api,
        ):
            for name in SECRETS_AT:
                fleet.add_cluster(name)
            api.seed(_secrets(fleet, root / "kubeconfigs"))
            yield fleet, Management(api, [], root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def grant(objects: list[Obj], account: str) -> dict[str, Any]:
    """What the rendered RBAC lets ``fleetwatch/<account>`` do, as the stand-in's token
    restrictions: the verbs and resources of its roles, in the namespaces of its
    RoleBindings (None: a ClusterRoleBinding, every namespace)."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": "fleetwatch"}
    verbs: set[str] = set()
    resources: set[str] = set()
    namespaces: set[str] | None = set()
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for binding in of_kind(objects, kind):
            if subject not in binding["subjects"]:
                continue
            ref = binding["roleRef"]
            role = (
                find(objects, "ClusterRole", ref["name"])
                if ref["kind"] == "ClusterRole"
                else next(
                    r
                    for r in of_kind(objects, "Role")
                    if r["metadata"]["name"] == ref["name"]
                    and r["metadata"]["namespace"] == binding["metadata"]["namespace"]
                )
            )
            for rule in role["rules"]:
                assert rule["apiGroups"] == [""], rule  # the stand-in's keys are core resources
                verbs |= set(rule["verbs"])
                resources |= set(rule["resources"])
            if kind == "ClusterRoleBinding":
                namespaces = None
            elif namespaces is not None:
                namespaces.add(binding["metadata"]["namespace"])
    assert verbs, f"nothing is granted to {account}"
    return {
        "namespaces": None if namespaces is None else sorted(namespaces),
        "verbs": sorted(verbs),
        "resources": sorted(resources),
    }


def _get(url: str) -> tuple[int, str]:
    return fetch(url, timeout=5)


@dataclass
class Running:
    container: Container
    port: int
    token: str
    log: Path

    def metrics(self) -> str:
        return _get(f"http://127.0.0.1:{self.port}/metrics")[1]


@pytest.fixture
def run_exporter(
    image: str, management: tuple[ThreadedFleet, Management], tmp_path: Path
) -> Iterator[Any]:
    _, mgmt = management
    started: list[Container] = []

    def run(overlay: str, *, drop_namespace_flags: bool = False) -> Running:
        objects = render(overlay)
        workload = find(objects, "Deployment", EXPORTER)
        user = f"system:serviceaccount:fleetwatch:{EXPORTER}"
        token = mgmt.api.issue_token(user, **grant(objects, EXPORTER))
        mgmt.tokens.append(token)
        if drop_namespace_flags:
            args = args_of(workload)
            args[:] = [a for a in args if not a.startswith(NAMESPACE_FLAG)]
        for item in workload["spec"]["template"]["spec"]["containers"][0]["env"]:
            if item["name"] == "CLUSTER_HEALTH_INTERVAL":
                item["value"] = "3"
        api = ApiServer("127.0.0.1", mgmt.api.cluster.port, mgmt.api.cluster.certs.ca_pem, token)
        root = Path(tempfile.mkdtemp(prefix=f"{overlay.split('/')[-1]}-", dir=mgmt.root))
        root.chmod(0o755)
        pod = pod_of(workload, {}, root, api=api)
        assert pod.token_mounted
        log = tmp_path / f"{root.name}.log"
        container = pod.container(image, log)
        started.append(container)
        container.start()
        port = pod.ports["metrics"]
        wait_until(lambda: _get(f"http://127.0.0.1:{port}/-/healthy")[0] == 200, 60, what="up")
        return Running(container, port, token, log)

    yield run
    for container in started:
        container.stop()


def _value(metrics: str, series: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def _no_credential_leaked(running: Running, fleet: ThreadedFleet) -> None:
    exposed = running.metrics() + running.log.read_text(errors="replace")
    for secret in (running.token, *(fleet.cluster(name).token for name in SECRETS_AT)):
        assert secret not in exposed


def test_the_argocd_overlay_probes_argo_cds_clusters_with_its_role_only(
    management: tuple[ThreadedFleet, Management], run_exporter: Any
) -> None:
    fleet, _ = management
    running = run_exporter("overlays/argocd")
    wait_until(
        lambda: probed_ok(running.metrics(), "argo-one"), 60, what="argo-one probed from the pod"
    )
    text = running.metrics()
    assert _value(text, "fleetwatch_discovery_kubernetes_up") == 1
    assert _value(text, 'fleetwatch_discovery_kubernetes_objects{kind="argocd"}') == 1
    assert 'fleetwatch_discovery_kubernetes_errors_total{reason="forbidden"}' not in text
    # The other namespaces are neither watched nor granted.
    assert 'cluster="capi-one"' not in text and 'cluster="own-one"' not in text
    assert _get(f"http://127.0.0.1:{running.port}/-/ready")[0] == 200
    _no_credential_leaked(running, fleet)


def test_the_cluster_api_overlay_probes_every_kind_in_every_namespace(
    management: tuple[ThreadedFleet, Management], run_exporter: Any
) -> None:
    fleet, _ = management
    running = run_exporter("overlays/cluster-api")

    def all_probed() -> bool:
        text = running.metrics()
        return all(probed_ok(text, name) for name in SECRETS_AT)

    wait_until(all_probed, 60, what="every Secret's cluster probed from the pod")
    text = running.metrics()
    assert _value(text, "fleetwatch_discovery_kubernetes_up") == 1
    for kind in ("argocd", "cluster-api", "labelled"):
        assert _value(text, f'fleetwatch_discovery_kubernetes_objects{{kind="{kind}"}}') == 1
    assert 'source="secret://fleet/own-one#kubeconfig"' in text
    assert 'source="secret://team-a/capi-one-kubeconfig"' in text
    _no_credential_leaked(running, fleet)


def test_a_watch_wider_than_the_role_is_refused(
    management: tuple[ThreadedFleet, Management], run_exporter: Any
) -> None:
    """What the tests above rely on: the token holds only what the rendered Role grants, so
    the argocd overlay's pod without its namespace flag (watching every namespace) is
    refused, counted and not ready; nothing crashes."""
    running = run_exporter("overlays/argocd", drop_namespace_flags=True)

    def refused() -> bool:
        series = 'fleetwatch_discovery_kubernetes_errors_total{reason="forbidden"}'
        value = _value(running.metrics(), series)
        return value is not None and value > 0

    wait_until(refused, 60, what="the cluster-wide list refused")
    assert _value(running.metrics(), "fleetwatch_discovery_kubernetes_up") == 0
    assert _get(f"http://127.0.0.1:{running.port}/-/ready")[0] == 503
    assert running.container.alive()
    assert "forbidden" in running.log.read_text(errors="replace").lower()


def test_the_helpers_read_the_rendered_rbac() -> None:
    """The grant helper reads what the overlays say (a ClusterRole: every namespace)."""
    argocd = grant(render("overlays/argocd"), EXPORTER)
    assert argocd == {
        "namespaces": ["argocd"],
        "verbs": ["get", "list", "watch"],
        "resources": ["secrets"],
    }
    assert grant(render("overlays/cluster-api"), EXPORTER)["namespaces"] is None
