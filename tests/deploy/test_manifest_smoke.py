"""The rendered manifests, run: every port, path and Secret file they name answers.

Each workload's pod runs in the image built for this session, as its manifest says
(deploy_pods.py: args, env, Secrets as files with their modes, read-only root, user,
no capabilities), on the host network with its listen address moved to 127.0.0.1:

- the exporter (overlays/prometheus-operator) with the Secret fleetwatch-kubeconfigs
  holding a stand-in fleet's kubeconfigs, one under a file name and one in Cluster API's
  format (key ``value``);
- the reactor on PostgreSQL (the Secret's URL points at a test server) and the reactor on
  SQLite (overlays/sqlite, its PersistentVolumeClaim a folder);
- one shard pod of overlays/sharded, which takes its shard index from its hostname.

Then every Service port, probe path, ServiceMonitor port and path, the ScrapeConfig's
service-discovery URL, the AlertmanagerConfig's webhook (with the token from the Secret it
names) and every Secret file the arguments name are resolved through the objects, as
Kubernetes and the Prometheus Operator would, and asked.
"""

from __future__ import annotations

import json
import secrets as random_secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from fleetwatch.procs import wait_until
from fleetwatch.standin import ThreadedFleet
from tests.helpers.deploy_image import Container, probed_ok
from tests.helpers.deploy_manifests import Obj, find, of_kind, render, workloads
from tests.helpers.deploy_pods import Pod, pod_of
from tests.helpers.quiet_http import fetch
from tests.helpers.reactor_payloads import ONLINE, alert, webhook
from tests.helpers.reactor_postgres import PostgresServer

# The first test builds the image (tests/deploy/conftest.py), minutes on a fresh machine.
pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

CLUSTERS = ("smoke-001", "smoke-002")
OPERATOR = "overlays/prometheus-operator"


@dataclass
class Running:
    overlay: str
    workload: Obj
    pod: Pod
    container: Container


@dataclass
class Loop:
    objects: dict[str, list[Obj]]
    pods: dict[str, Running]
    secrets: dict[str, dict[str, str]]
    postgres_url: str


def _get(url: str, *, data: bytes | None = None, token: str | None = None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return fetch(url, data=data, headers=headers)


@pytest.fixture(scope="module")
def loop(image: str) -> Iterator[Loop]:
    root = Path(tempfile.mkdtemp(prefix="fleetwatch-smoke-"))
    root.chmod(0o755)
    postgres = PostgresServer(Path(tempfile.mkdtemp(prefix="fleetwatch-smoke-pg-")))
    started: list[Container] = []
    try:
        postgres.init().start()
        with ThreadedFleet(root / "fleet") as fleet:
            fleet.add_clusters(len(CLUSTERS), prefix="smoke")
            # One kubeconfig under a file name, one in Cluster API's format (key `value`).
            first, second = (
                fleet.write_kubeconfig(root / "fleet" / f"{name}.yaml", [name]).read_text()
                for name in CLUSTERS
            )
            secrets = {
                # What docs/deployment.md tells the user to create.
                "fleetwatch-reactor-db": {
                    "url": postgres.create_database("smoke"),
                    "password": "not-needed-with-trust\n",
                },
                "fleetwatch-reactor-token": {"token": random_secrets.token_hex(16) + "\n"},
                "fleetwatch-kubeconfigs": {"smoke-001.yaml": first, "value": second},
            }
            objects = {
                overlay: render(overlay)
                for overlay in (
                    "overlays/prometheus-operator",
                    "overlays/sqlite",
                    "overlays/sharded",
                )
            }
            wanted = [
                ("exporter", OPERATOR, "Deployment", "fleetwatch-exporter", None),
                ("reactor", OPERATOR, "Deployment", "fleetwatch-reactor", None),
                ("reactor-sqlite", "overlays/sqlite", "Deployment", "fleetwatch-reactor", None),
                ("shard-a-1", "overlays/sharded", "StatefulSet", "fleetwatch-exporter-a", 1),
            ]  # fmt: skip
            pods: dict[str, Running] = {}
            for key, overlay, kind, name, ordinal in wanted:
                workload = find(objects[overlay], kind, name)
                pod = pod_of(workload, secrets, root / key, ordinal=ordinal)
                probe = workload["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
                container = pod.container(
                    image, root / f"{key}.log", ready_path=probe["httpGet"]["path"]
                )
                started.append(container)
                container.start(ready_timeout=60)
                pods[key] = Running(overlay, workload, pod, container)
            yield Loop(objects, pods, secrets, secrets["fleetwatch-reactor-db"]["url"])
    finally:
        for container in started:
            container.stop()
        postgres.stop()
        postgres.remove()
        shutil.rmtree(root, ignore_errors=True)


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def _pods_of_service(loop: Loop, overlay: str, service: Obj) -> list[Running]:
    """The running pods behind ``service``: its overlay's workloads it selects (at least
    one), each stood for by a running pod of the same pod template (from any overlay)."""
    selector = service["spec"]["selector"]
    selected = [
        w
        for w in workloads(loop.objects[overlay])
        if _labels_match(selector, w["spec"]["template"]["metadata"]["labels"])
    ]
    name = service["metadata"]["name"]
    assert selected, f"{overlay}: Service {name} selects no workload"
    behind = [
        running
        for running in loop.pods.values()
        if any(running.workload["spec"]["template"] == w["spec"]["template"] for w in selected)
    ]
    assert behind, f"{overlay}: no running pod stands for what Service {name} selects"
    return behind


def _service_port(service: Obj, port: int | str) -> Obj:
    entry: Obj
    for entry in service["spec"]["ports"]:
        if port in (entry["port"], entry.get("name")):
            return entry
    raise AssertionError(f"Service {service['metadata']['name']} has no port {port}")


def _url_through_service(loop: Loop, overlay: str, url: str) -> list[str]:
    """An in-cluster URL (``http://SERVICE.NAMESPACE.svc:PORT/PATH``) as host URLs, one per
    pod behind the Service."""
    parts = urlsplit(url)
    service_name, namespace = parts.hostname.split(".")[:2]  # type: ignore[union-attr]
    service = find(loop.objects[overlay], "Service", service_name)
    assert namespace == service["metadata"]["namespace"]
    target = _service_port(service, parts.port or 80)["targetPort"]
    behind = _pods_of_service(loop, overlay, service)
    return [f"http://127.0.0.1:{r.pod.ports[target]}{parts.path}" for r in behind]


# --- tests ---------------------------------------------------------------------------------


def test_every_probe_path_answers(loop: Loop) -> None:
    for key, running in loop.pods.items():
        container = running.workload["spec"]["template"]["spec"]["containers"][0]
        for probe in ("livenessProbe", "readinessProbe"):
            action = container[probe]["httpGet"]
            url = f"http://127.0.0.1:{running.pod.ports[action['port']]}{action['path']}"
            assert _get(url)[0] == 200, f"{key} {probe} {url}"


def test_every_service_port_reaches_a_listener(loop: Loop) -> None:
    checked = 0
    for overlay, objects in loop.objects.items():
        for service in of_kind(objects, "Service"):
            behind = _pods_of_service(loop, overlay, service)
            for entry in service["spec"]["ports"]:
                for running in behind:
                    port = running.pod.ports[entry["targetPort"]]
                    status, _ = _get(f"http://127.0.0.1:{port}/")
                    assert 200 <= status < 500
                    checked += 1
    assert checked >= 5


def test_every_servicemonitor_endpoint_serves_metrics(loop: Loop) -> None:
    for overlay in ("overlays/prometheus-operator", "overlays/sharded"):
        objects = loop.objects[overlay]
        for monitor in of_kind(objects, "ServiceMonitor"):
            services = [
                s
                for s in of_kind(objects, "Service")
                if _labels_match(
                    monitor["spec"]["selector"]["matchLabels"], s["metadata"].get("labels", {})
                )
            ]
            assert len(services) == 1, (monitor["metadata"]["name"], services)
            for endpoint in monitor["spec"]["endpoints"]:
                entry = _service_port(services[0], endpoint["port"])
                behind = _pods_of_service(loop, overlay, services[0])
                assert behind
                for running in behind:
                    port = running.pod.ports[entry["targetPort"]]
                    status, body = _get(f"http://127.0.0.1:{port}{endpoint['path']}")
                    assert status == 200 and "# TYPE " in body, monitor["metadata"]["name"]


def test_the_exporter_probes_the_clusters_of_the_mounted_secret(loop: Loop) -> None:
    port = loop.pods["exporter"].pod.ports["metrics"]

    def probed() -> bool:
        _, text = _get(f"http://127.0.0.1:{port}/metrics")
        return all(probed_ok(text, cluster) for cluster in CLUSTERS)

    wait_until(probed, 60, what="both stand-in clusters probed from the pod")


def test_the_shard_pod_takes_its_index_from_its_name(loop: Loop) -> None:
    port = loop.pods["shard-a-1"].pod.ports["metrics"]
    _, text = _get(f"http://127.0.0.1:{port}/metrics")
    shard_lines = [
        line for line in text.splitlines() if line.startswith("fleetwatch_exporter_shard")
    ]
    assert shard_lines, "the exporter exposes no fleetwatch_exporter_shard"
    assert any('index="1"' in line and 'count="2"' in line for line in shard_lines), shard_lines


def test_the_scrapeconfig_discovers_through_the_exporter(loop: Loop) -> None:
    overlay = "overlays/prometheus-operator"
    config = find(loop.objects[overlay], "ScrapeConfig", "fleetwatch-control-plane")
    for sd in config["spec"]["httpSDConfigs"]:
        for url in _url_through_service(loop, overlay, sd["url"]):
            status, body = _get(url)
            assert status == 200
            assert isinstance(json.loads(body), list)
    # Sharded: one URL per pod of each StatefulSet, by its stable name.
    sharded = loop.objects["overlays/sharded"]
    config = find(sharded, "ScrapeConfig", "fleetwatch-control-plane")
    urls = [sd["url"] for sd in config["spec"]["httpSDConfigs"]]
    expected = []
    for statefulset in of_kind(sharded, "StatefulSet"):
        headless = statefulset["spec"]["serviceName"]
        find(sharded, "Service", headless)
        name = statefulset["metadata"]["name"]
        expected += [
            f"{name}-{i}.{headless}.fleetwatch.svc" for i in range(statefulset["spec"]["replicas"])
        ]
    assert sorted(urlsplit(url).hostname or "" for url in urls) == sorted(expected)
    port = loop.pods["shard-a-1"].pod.ports["metrics"]
    for url in urls:
        if urlsplit(url).hostname.startswith("fleetwatch-exporter-a-1."):  # type: ignore[union-attr]
            assert urlsplit(url).port == 9713
            assert _get(f"http://127.0.0.1:{port}{urlsplit(url).path}")[0] == 200


def test_every_secret_file_is_readable_in_the_container(loop: Loop) -> None:
    for key, running in loop.pods.items():
        paths = list(running.pod.secret_files)
        paths += [a.split("=", 1)[1] for a in running.pod.args if a.split("=")[0].endswith("-file")]
        assert paths, key
        for path in paths:
            running.container.exec("test", "-r", path)
        if "KUBECONFIG_DIR" in running.pod.env:
            listing = running.container.exec(
                "find", running.pod.env["KUBECONFIG_DIR"], "-type", "f"
            )
            assert listing.split(), f"{key}: KUBECONFIG_DIR holds no file"


def test_the_alertmanagerconfig_webhook_reaches_each_reactor(loop: Loop) -> None:
    overlay = "overlays/prometheus-operator"
    config = find(loop.objects[overlay], "AlertmanagerConfig", "fleetwatch-reactor")
    hook = config["spec"]["receivers"][0]["webhookConfigs"][0]
    ref = hook["httpConfig"]["authorization"]["credentials"]
    token = loop.secrets[ref["name"]][ref["key"]].strip()
    body = json.dumps(webhook(alert(ONLINE, "smoke-001", 0))).encode()
    urls = _url_through_service(loop, overlay, hook["url"])
    # The same Service and path in the SQLite overlay.
    urls += _url_through_service(loop, "overlays/sqlite", hook["url"])
    assert len(urls) == 2
    for url in urls:
        assert _get(url, data=body)[0] == 401, "the token is not required"
        status, text = _get(url, data=body, token=token)
        assert status == 200, text
        _, clusters = _get(url.replace("/alerts", "/clusters"))
        assert {c["name"]: c["status"] for c in json.loads(clusters)}.get("smoke-001") == "ONLINE"


def test_the_postgresql_reactor_keeps_its_state_in_the_database(loop: Loop) -> None:
    port = loop.pods["reactor"].pod.ports["http"]
    _get(f"http://127.0.0.1:{port}/-/ready")
    with psycopg.connect(loop.postgres_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables is not None and tables[0] > 0
    files = loop.pods["reactor-sqlite"].container.exec("ls", "/var/lib/fleetwatch")
    assert "fleetwatch.db" in files.split()
