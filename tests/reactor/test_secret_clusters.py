"""The reactor with ``--discovery.kubernetes``: clusters from a management cluster's Secrets.

In process: the management stand-in holding Secrets of every kind, and the reactor's app
with the informer in its own process or in its discovery process (each test runs both).
The clusters are upserted (files first, then Secrets by namespace and name), a rotated
Secret moves the endpoint, a deleted one leaves its cluster in the store, ``POST
/clusters`` warns only for a reference it cannot probe, and an API that fails leaves the
API and the gate answering. Every credential in the Secrets is a sentinel that no log line
may hold.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin.management import (
    ManagementCluster,
    ThreadedManagementCluster,
)
from fleetwatch.standin.management.kinds import SECRETS
from reactor.app import create_app
from reactor.context import ReactorSettings
from tests.helpers.discovery_informer import (
    SENTINEL,
    argocd_secret,
    b64,
    capi_secret,
    labelled_secret,
    plain_secret,
)
from tests.helpers.reactor_helpers import MakeClient, db_flag, until
from tests.helpers.reactor_payloads import ONLINE, alert, webhook

pytestmark = pytest.mark.live

FAST = InformerSettings(watch_seconds=(30.0, 30.0), backoff_initial=0.05, backoff_max=0.2)
Client = TestClient[Any, Any]


def argocd_aws(name: str) -> dict[str, Any]:
    """An Argo CD cluster Secret signed in with AWS: listed, not probeable."""
    config = {
        "awsAuthConfig": {"clusterName": name, "roleARN": f"arn:aws:iam::1:role/{SENTINEL}"},
        "tlsClientConfig": {"caData": b64(f"{SENTINEL}-ca"), "keyData": b64(f"{SENTINEL}-key")},
    }
    secret = argocd_secret(name, "https://127.0.0.17:6443")
    secret["data"]["config"] = b64(json.dumps(config))
    return secret


def argocd_basic(name: str) -> dict[str, Any]:
    """An Argo CD cluster Secret with a username and password."""
    config = {"username": "admin", "password": f"{SENTINEL}-password", "tlsClientConfig": {}}
    secret = argocd_secret(name, "https://127.0.0.18:6443")
    secret["data"]["config"] = b64(json.dumps(config))
    return secret


def kubeconfig(path: Path, contexts: dict[str, str]) -> Path:
    """A kubeconfig file: one context per ``name -> server``, token auth."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in contexts.items()],
        "users": [{"name": n, "user": {"token": f"{SENTINEL}-file"}} for n in contexts],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in contexts],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def kubernetes(mgmt: ManagementCluster, **settings: Any) -> KubernetesDiscovery:
    return KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=FAST, **settings)


async def clusters(client: Client) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in await (await client.get("/clusters")).json()}


async def ready(client: Client) -> bool:
    return (await client.get("/-/ready")).status == 200


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def warnings_about(caplog: pytest.LogCaptureFixture, cluster: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.getMessage().startswith(f"cluster {cluster}:")
    ]


@pytest.fixture(params=[False, True], ids=["inline", "process"])
def discovery_process(request: pytest.FixtureRequest) -> bool:
    """The Secrets read by an informer of the reactor's own process, or by its discovery
    process (``reactor.secretlink``): the same clusters, logs and metrics either way."""
    return bool(request.param)


@pytest.fixture
def start(
    aiohttp_client: Any, tmp_path: Path, discovery_process: bool
) -> Callable[..., Awaitable[Client]]:
    """A reactor app on a SQLite file of the test's own; keywords go to ReactorSettings."""

    async def make(**settings: Any) -> Client:
        settings.setdefault("db_path", tmp_path / "fleetwatch.db")
        settings.setdefault("discovery_debounce_s", 0.05)
        settings.setdefault("discovery_process", discovery_process)
        client: Client = await aiohttp_client(create_app(ReactorSettings(**settings)))
        return client

    return make


async def test_the_clusters_of_every_kind_of_secret_are_upserted_after_the_files(
    make_client: MakeClient,
    mgmt: ManagementCluster,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    discovery_process: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    main = kubeconfig(tmp_path / "config", {"taken": "https://127.0.0.1:6443"})
    mgmt.seed(
        [
            argocd_secret("argo-a", "https://127.0.0.11:6443"),
            argocd_basic("argo-basic"),
            argocd_aws("argo-aws"),
            argocd_secret("taken", "https://127.0.0.19:6443"),  # a file has the name first
            capi_secret("capi-1"),
            capi_secret("capi-1", suffix="ca"),  # Cluster API's other Secrets: not read
            labelled_secret("team-x", ["ctx-1", "ctx-2"]),
            plain_secret("unlabelled"),
        ]
    )
    client = await make_client(
        kubeconfig_path=main,
        kubernetes=kubernetes(mgmt),
        discovery_debounce_s=0.05,
        discovery_process=discovery_process,
    )
    await until(lambda: ready(client), what="/-/ready after the first list")

    async def all_upserted() -> bool:
        return len(await clusters(client)) == 7

    await until(all_upserted, what="every cluster upserted")
    upserted = await clusters(client)
    assert {(c["source"], c["status"]) for c in upserted.values()} == {("discovery", "UNKNOWN")}
    found = {name: (c["endpoint"], c["kubeconfig_secret_ref"]) for name, c in upserted.items()}
    assert found == {
        "taken": ("https://127.0.0.1:6443", str(main)),
        "argo-a": ("https://127.0.0.11:6443", "secret://argocd/cluster-argo-a"),
        "argo-basic": ("https://127.0.0.18:6443", "secret://argocd/cluster-argo-basic"),
        "argo-aws": ("https://127.0.0.17:6443", "secret://argocd/cluster-argo-aws"),
        "capi-1": ("https://127.0.0.12:6443", "secret://fleet/capi-1-kubeconfig"),
        "ctx-1": ("https://127.0.0.12:6443", "secret://teams/team-x#ctx-1.yaml"),
        "ctx-2": ("https://127.0.0.12:6443", "secret://teams/team-x#ctx-2.yaml"),
    }
    messages = [r.getMessage() for r in caplog.records]
    duplicate = (
        f"secret://argocd/cluster-taken (context 'taken'): duplicate name: first seen in {main}"
    )
    assert sum(duplicate in m for m in messages) == 1
    assert any(
        m.startswith("cluster argo-aws (secret://argocd/cluster-argo-aws) cannot be probed: ")
        and "awsAuthConfig" in m
        for m in messages
    )
    metrics = samples(await (await client.get("/metrics")).text())
    assert metrics[("fleetwatch_discovery_kubernetes_up", ())] == 1
    objects = "fleetwatch_discovery_kubernetes_objects"
    assert metrics[(objects, (("kind", "argocd"),))] == 4
    assert metrics[(objects, (("kind", "cluster-api"),))] == 1
    assert metrics[(objects, (("kind", "labelled"),))] == 1
    assert SENTINEL not in caplog.text
    assert mgmt.token not in caplog.text


async def test_a_known_cluster_keeps_its_state_a_rotation_moves_it_a_deletion_keeps_it(
    start: Callable[..., Awaitable[Client]],
    mgmt: ManagementCluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client = await start(kubernetes=kubernetes(mgmt))
    await until(lambda: ready(client), what="/-/ready after the first (empty) list")
    ref = "secret://argocd/cluster-argo-a"
    body = {"name": "argo-a", "endpoint": "https://old:6443", "kubeconfig_secret_ref": ref}
    assert (await client.post("/clusters", json=body)).status == 201
    assert (await client.post("/alerts", json=webhook(alert(ONLINE, "argo-a", 0)))).status == 200
    assert (await client.post("/apps", json={"name": "web", "cluster": "argo-a"})).status == 201

    async def endpoint_is(endpoint: str) -> bool:
        return (await clusters(client))["argo-a"]["endpoint"] == endpoint

    # Its Secret appears: endpoint updated; status, source and apps stay.
    mgmt.seed([argocd_secret("argo-a", "https://127.0.0.11:6443")])
    await until(lambda: endpoint_is("https://127.0.0.11:6443"), what="the Secret's endpoint")
    argo_a = (await clusters(client))["argo-a"]
    assert (argo_a["status"], argo_a["source"], argo_a["kubeconfig_secret_ref"]) == (
        "ONLINE",
        "api",
        ref,
    )
    assert (await (await client.get("/apps/web")).json())["cluster"] == "argo-a"

    # Rotated (new server, new token): the new endpoint, without a restart.
    mgmt.seed([argocd_secret("argo-a", "https://127.0.0.15:6443", token="ROTATED")])
    await until(lambda: endpoint_is("https://127.0.0.15:6443"), what="the rotated endpoint")

    # Deleted: an upsert deletes nothing; the log says the Secret is gone.
    mgmt.state.store.delete(SECRETS, "argocd", "cluster-argo-a")

    async def said_gone() -> bool:
        return any("is gone from the management cluster" in r.getMessage() for r in caplog.records)

    await until(said_gone, what="the deletion logged")
    argo_a = (await clusters(client))["argo-a"]
    assert (argo_a["endpoint"], argo_a["status"]) == ("https://127.0.0.15:6443", "ONLINE")
    assert SENTINEL not in caplog.text and "ROTATED" not in caplog.text


async def test_post_clusters_warns_only_for_a_reference_discovery_cannot_probe(
    start: Callable[..., Awaitable[Client]],
    mgmt: ManagementCluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mgmt.seed([argocd_secret("argo-a"), argocd_aws("argo-aws"), labelled_secret("team-x", ["c1"])])
    client = await start(kubernetes=kubernetes(mgmt))
    await until(lambda: ready(client), what="/-/ready")
    await until(lambda: _count(client, 3), what="the Secrets' clusters upserted")
    refs = {
        "held": "secret://argocd/cluster-argo-a",
        "held-key": "secret://teams/team-x#c1.yaml",
        "refused": "secret://argocd/cluster-argo-aws",
        "unknown": "secret://argocd/cluster-nothing",
        "no-key": "secret://teams/team-x",
        "bare": "edge-1-kubeconfig",
    }
    caplog.set_level(logging.WARNING)
    for name, ref in refs.items():
        body = {"name": name, "endpoint": "https://127.1.0.1:6443", "kubeconfig_secret_ref": ref}
        assert (await client.post("/clusters", json=body)).status == 201
    assert warnings_about(caplog, "held") == []
    assert warnings_about(caplog, "held-key") == []
    (refused,) = warnings_about(caplog, "refused")
    assert "cannot be probed: its config has awsAuthConfig" in refused
    assert refused.endswith("it cannot be probed and stays UNKNOWN")
    (unknown,) = warnings_about(caplog, "unknown")
    assert "names no Secret that discovery holds" in unknown
    assert "names no Secret that discovery holds" in warnings_about(caplog, "no-key")[0]
    assert "'edge-1-kubeconfig' is not a readable file" in warnings_about(caplog, "bare")[0]
    assert SENTINEL not in caplog.text


async def _count(client: Client, n: int) -> bool:
    return len(await clusters(client)) >= n


async def test_without_discovery_from_the_api_a_secret_reference_says_so(
    start: Callable[..., Awaitable[Client]], caplog: pytest.LogCaptureFixture
) -> None:
    client = await start()
    assert await ready(client)
    body = {
        "name": "c",
        "endpoint": "https://127.1.0.1:6443",
        "kubeconfig_secret_ref": "secret://a/b",
    }
    with caplog.at_level(logging.WARNING):
        assert (await client.post("/clusters", json=body)).status == 201
    (warning,) = warnings_about(caplog, "c")
    assert "names a Secret, and the reactor does not read Secrets (--discovery.kubernetes)" in (
        warning
    )


async def test_an_api_that_fails_leaves_the_api_and_the_gate_answering(
    start: Callable[..., Awaitable[Client]], mgmt: ManagementCluster
) -> None:
    mgmt.seed([argocd_secret("argo-a")])
    mgmt.arm_fault(kind="error", count=100_000, verb="list", resource="secrets")
    client = await start(kubernetes=kubernetes(mgmt))
    not_ready = await client.get("/-/ready")
    assert not_ready.status == 503
    assert "the first list of the management cluster's Secrets" in await not_ready.text()
    assert (await client.get("/-/healthy")).status == 200
    body = {"name": "c1", "endpoint": "https://127.1.0.1:6443", "kubeconfig_secret_ref": "x"}
    assert (await client.post("/clusters", json=body)).status == 201
    assert (await client.post("/apps", json={"name": "web", "cluster": "c1"})).status == 201
    resp = await client.post("/deployments", json={"app": "web", "cluster": "c1"})
    assert resp.status == 201

    async def errors_counted() -> bool:
        got = samples(await (await client.get("/metrics")).text())
        errors = got.get(
            ("fleetwatch_discovery_kubernetes_errors_total", (("reason", "server_error"),))
        )
        return bool(errors) and got[("fleetwatch_discovery_kubernetes_up", ())] == 0

    await until(errors_counted, what="the API's errors on the reactor's /metrics")
    mgmt.clear_faults()
    await until(lambda: ready(client), what="ready once the API answers")
    await until(lambda: _count(client, 2), what="the Secret's cluster upserted")
    assert (await clusters(client))["argo-a"]["kubeconfig_secret_ref"] == (
        "secret://argocd/cluster-argo-a"
    )


def test_fleetwatch_reactor_runs_the_informer_and_logs_no_credential(
    tmp_path: Path,
) -> None:
    """The command line: the flags reach the app, the process upserts, its log is clean;
    credentials that cannot be loaded stop it at start with a clear message."""
    db_path = tmp_path / "fleetwatch.db"
    with ThreadedManagementCluster(tmp_path / "mgmt") as mgmt:
        mgmt.seed([argocd_secret("argo-a"), argocd_basic("argo-basic"), capi_secret("capi-1")])
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "fleetwatch.cli", "reactor",
                f"--web.listen-address=127.0.0.1:{port}", db_flag(db_path), "--kubeconfig=",
                "--discovery.kubernetes", f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}",
                "--discovery.kubernetes.namespace=argocd", "--log.level=debug"]  # fmt: skip
        log = tmp_path / "reactor.log"
        with ManagedProcess(argv, log, ready_url=f"{url}/-/ready") as proc:

            def names() -> set[str] | None:
                with urllib.request.urlopen(f"{url}/clusters", timeout=5) as resp:
                    found = {c["name"] for c in json.load(resp)}
                return found if len(found) >= 2 else None

            # capi-1 is in namespace fleet, not watched
            assert wait_until(names, 20, what="the Secrets' clusters") == {"argo-a", "argo-basic"}
            assert proc.stop() == 0, proc.log_tail()
        text = log.read_text()
        assert "clusters from Secrets: 2 cluster(s)" in text
        assert SENTINEL not in text and mgmt.token not in text

    bad = [*argv[:-3], f"--discovery.kubernetes.kubeconfig={tmp_path / 'missing.yaml'}"]
    done = subprocess.run(bad, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "fleetwatch reactor: --discovery.kubernetes:" in done.stderr
    assert "missing.yaml" in done.stderr
