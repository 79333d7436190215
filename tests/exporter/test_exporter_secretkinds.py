"""Every kind of Secret and every credential form an Argo CD ``config`` can carry, probed.

End to end, in process, as ``tests/exporter/test_exporter_secretsource.py``: a stand-in
workload fleet, the stand-in management cluster holding one Secret per way a platform team
writes them, and ``create_app`` with ``--discovery.kubernetes``. What is asserted is what
the user sees: ``fleetwatch_cluster_probe_success`` per cluster, the warning for a cluster
listed but not probeable, the informer's series while its API fails and after, a deleted
Secret's connection closed, and no credential in the logs, ``/metrics`` or a file.

The workload stand-in accepts a bearer token or a client certificate of its CA (as a
kube-apiserver does; basic auth left Kubernetes in 1.19, so ``username``/``password`` is
read and sent but has no server to succeed against here).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from test_exporter_proxy import Tinyproxy

from exporter import server
from exporter.net import remove_temp_files
from exporter.server import INFORMER, MONITOR, create_app
from exporter.settings import ExporterSettings
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.discovery.shard import Shard
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin import StandinFleet
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import SECRETS
from fleetwatch.standin.workload.kubeconfig import kubeconfig_dict
from tests.helpers.discovery_informer import until

pytestmark = pytest.mark.live

ClientFactory = Callable[[web.Application], Any]
FAST = InformerSettings(watch_seconds=(30.0, 30.0), backoff_initial=0.05, backoff_max=0.2)
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def secret(
    name: str,
    namespace: str,
    data: dict[str, str],
    labels: dict[str, str] | None = None,
    type_: str = "Opaque",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": type_,
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": {key: b64(value) for key, value in data.items()},
    }


def argocd(name: str, server: str, config: dict[str, Any]) -> dict[str, Any]:
    return secret(
        f"cluster-{name}",
        "argocd",
        {"name": name, "server": server, "config": json.dumps(config)},
        {"argocd.argoproj.io/secret-type": "cluster"},
    )


def samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def success(got: Samples, cluster: str) -> float | None:
    return got.get(("fleetwatch_cluster_probe_success", (("cluster", cluster),)))


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Tinyproxy]:
    folder = tmp_path / "tinyproxy"
    folder.mkdir()
    started = Tinyproxy(folder).start()
    yield started
    started.stop()


def own_temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder for the product's files, this test's alone.

    ``tempfile`` in this process and ``TMPDIR`` in the processes it starts (the exec
    plugin) point into the test's folder, and the Kubernetes client's private folder is
    made anew there: what the product writes to temporary files is then all under it, and
    the test reads no folder but its own (a walk of all of ``/tmp`` on a busy machine
    meets other processes' folders as they are removed).
    """
    folder = tmp_path / "tmp"
    folder.mkdir()
    remove_temp_files()  # the client's folder, if this process made one, is made anew
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


async def test_each_kind_and_credential_form_is_probed_and_none_leaks(
    tmp_path: Path,
    mgmt: ManagementCluster,
    proxy: Tinyproxy,
    aiohttp_client: ClientFactory,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    temp = own_temp_folder(tmp_path, monkeypatch)
    async with StandinFleet(tmp_path / "fleet") as fleet:
        names = [
            "argo-token",
            "argo-cert",
            "argo-insecure",
            "argo-servername",
            "argo-exec",
            "argo-proxy",
            "capi-one",
            "lab-a",
            "lab-b",
            "unlabelled",
        ]
        c = {name: await fleet.add_cluster(name) for name in names}
        ca = b64(fleet.certs.ca_pem)
        cert = fleet.certs.default_client
        token_file = tmp_path / "exec.token"
        token_file.write_text(c["argo-exec"].token + "\n")
        capi = kubeconfig_dict([c["capi-one"]], fleet.certs, tmp_path / "tokens")
        labelled = kubeconfig_dict(
            [c["lab-a"], c["lab-b"]], fleet.certs, tmp_path / "tokens", credential="token"
        )
        hidden = kubeconfig_dict([c["unlabelled"]], fleet.certs, tmp_path / "tokens")
        localhost = c["argo-servername"].url.replace("127.0.0.1", "localhost")
        mgmt.seed(
            [
                argocd(
                    "argo-token",
                    c["argo-token"].url,
                    {"bearerToken": c["argo-token"].token, "tlsClientConfig": {"caData": ca}},
                ),
                argocd(
                    "argo-cert",
                    c["argo-cert"].url,
                    {
                        "tlsClientConfig": {
                            "caData": ca,
                            "certData": b64(cert.cert_pem),
                            "keyData": b64(cert.key_pem),
                        }
                    },
                ),
                argocd(
                    "argo-insecure",
                    c["argo-insecure"].url,
                    {
                        "bearerToken": c["argo-insecure"].token,
                        "tlsClientConfig": {"insecure": True},
                    },
                ),
                # The certificate names localhost and 127.0.0.1: dialled at 127.0.0.1 with
                # serverName localhost, verified against the name, not the address.
                argocd(
                    "argo-servername",
                    c["argo-servername"].url,
                    {
                        "bearerToken": c["argo-servername"].token,
                        "tlsClientConfig": {"caData": ca, "serverName": "localhost"},
                    },
                ),
                argocd(
                    "argo-exec",
                    c["argo-exec"].url,
                    {
                        "execProviderConfig": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": sys.executable,
                            "args": [
                                "-m",
                                "fleetwatch.standin",
                                "exec-credential",
                                "--token-file",
                                str(token_file),
                            ],
                        },
                        "tlsClientConfig": {"caData": ca},
                    },
                ),
                argocd(
                    "argo-proxy",
                    c["argo-proxy"].url,
                    {
                        "bearerToken": c["argo-proxy"].token,
                        "proxyUrl": proxy.url,
                        "tlsClientConfig": {"caData": ca},
                    },
                ),
                argocd(
                    "argo-aws",
                    localhost,
                    {"awsAuthConfig": {"clusterName": "eks-1", "roleARN": "arn:aws:iam::1:r"}},
                ),
                secret(
                    "capi-one-kubeconfig",
                    "capi-ns",
                    {"value": yaml.safe_dump(capi)},
                    {"cluster.x-k8s.io/cluster-name": "capi-one"},
                    "cluster.x-k8s.io/secret",
                ),
                secret(
                    "team-clusters",
                    "fleet",
                    {"kubeconfig": yaml.safe_dump(labelled)},
                    {"fleetwatch.io/kubeconfig": "true"},
                ),
                secret("not-for-us", "fleet", {"kubeconfig": yaml.safe_dump(hidden)}),
            ]
        )
        kubernetes = KubernetesDiscovery(
            kubeconfig=str(mgmt.kubeconfig), informer=FAST, exec_plugins=True
        )
        app = create_app(
            ExporterSettings(interval=60, timeout=5, kubernetes=kubernetes), run_loop=False
        )
        client = await aiohttp_client(app)
        informer = app[INFORMER]
        assert informer is not None and await informer.wait_synced(10)
        monitor = app[MONITOR]
        await monitor.run_cycle()

        text = await (await client.get("/metrics")).text()
        got = samples(text)
        for name in names[:-1]:
            assert success(got, name) == 1, name
        assert success(got, "unlabelled") is None  # an unlabelled Secret is not read
        assert got[("fleetwatch_cluster_probeable", (("cluster", "argo-aws"),))] == 0
        assert proxy.connects(), "argo-proxy's probe went through its proxyUrl"
        assert any(
            "argo-aws is not probed" in r.getMessage() and "awsAuthConfig" in r.getMessage()
            for r in caplog.records
        )
        for kind, count in (("argocd", 7), ("cluster-api", 1), ("labelled", 1)):
            assert got[("fleetwatch_discovery_kubernetes_objects", (("kind", kind),))] == count

        # The management API fails for a while: the clusters stay, the errors are counted.
        mgmt.arm_fault(kind="error", resource="secrets", count=10_000)
        mgmt.close_watches()
        await until(lambda: not informer.up)
        await monitor.run_cycle()
        got = samples(await (await client.get("/metrics")).text())
        assert success(got, "argo-token") == 1
        assert got[("fleetwatch_discovery_kubernetes_up", ())] == 0
        assert got[("fleetwatch_discovery_kubernetes_errors_total", (("reason", "server_error"),))]
        mgmt.clear_faults()
        await until(lambda: informer.up)
        await monitor.run_cycle()
        got = samples(await (await client.get("/metrics")).text())
        assert got[("fleetwatch_discovery_kubernetes_up", ())] == 1
        assert success(got, "capi-one") == 1

        # A Secret deleted: its cluster goes, and the connection to it is closed.
        before = fleet.connections
        held = len(informer.objects())
        mgmt.state.store.delete(SECRETS, "argocd", "cluster-argo-token")
        await until(lambda: len(informer.objects()) == held - 1)
        await monitor.run_cycle()
        text = await (await client.get("/metrics")).text()
        assert 'cluster="argo-token"' not in text
        await until(lambda: fleet.connections < before)

        # No credential anywhere the user can look.
        credentials = [cluster.token for cluster in c.values()]
        credentials += [b64(cert.key_pem), cert.key_pem.decode().splitlines()[1]]
        logs = "\n".join(r.getMessage() for r in caplog.records)
        logs += "\n".join(str(r.exc_info) for r in caplog.records if r.exc_info)
        for credential in credentials:
            assert credential not in logs
            assert credential not in text
        # Its temporary files (the stand-ins' kubeconfigs and the exec token are elsewhere).
        for path in temp.rglob("*"):
            if path.is_file():
                content = path.read_bytes()
                for credential in credentials:
                    assert credential.encode() not in content, f"{path} holds a credential"


async def test_every_shard_watches_and_probes_its_share(
    tmp_path: Path, mgmt: ManagementCluster, aiohttp_client: ClientFactory
) -> None:
    async with StandinFleet(tmp_path / "fleet") as fleet:
        clusters = await fleet.add_clusters(12, prefix="sharded")
        ca = b64(fleet.certs.ca_pem)
        mgmt.seed(
            [
                argocd(c.name, c.url, {"bearerToken": c.token, "tlsClientConfig": {"caData": ca}})
                for c in clusters
            ]
        )
        kubernetes = KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=FAST)
        probed: list[set[str]] = []
        for index in (0, 1):
            settings = ExporterSettings(
                interval=60, timeout=5, kubernetes=kubernetes, shard=Shard(index, 2)
            )
            app = create_app(settings, run_loop=False)
            client = await aiohttp_client(app)
            informer = app[INFORMER]
            assert informer is not None and await informer.wait_synced(10)
            await app[MONITOR].run_cycle()
            got = samples(await (await client.get("/metrics")).text())
            # Each shard holds every Secret, and probes its share of the clusters.
            assert got[("fleetwatch_discovery_kubernetes_objects", (("kind", "argocd"),))] == 12
            probed.append({c.name for c in clusters if success(got, c.name) == 1})
        assert probed[0] and probed[1]
        assert probed[0].isdisjoint(probed[1])
        assert probed[0] | probed[1] == {c.name for c in clusters}


async def test_a_slow_first_list_is_probed_when_it_comes_not_an_interval_later(
    tmp_path: Path,
    mgmt: ManagementCluster,
    aiohttp_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: /-/ready said 200 after a first cycle that ran before the first list, and
    the Secrets' clusters waited a whole interval (300 s) for the next one."""
    monkeypatch.setattr(server, "FIRST_LIST_WAIT_S", 0.2)
    async with StandinFleet(tmp_path / "fleet") as fleet:
        one = await fleet.add_cluster("slow-one")
        ca = b64(fleet.certs.ca_pem)
        mgmt.seed(
            [
                argocd(
                    one.name, one.url, {"bearerToken": one.token, "tlsClientConfig": {"caData": ca}}
                )
            ]
        )
        mgmt.arm_fault(kind="delay", verb="list", resource="secrets", count=1, delay_seconds=1.5)
        kubernetes = KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=FAST)
        app = create_app(ExporterSettings(interval=300, timeout=5, kubernetes=kubernetes))
        client = await aiohttp_client(app)
        assert (await client.get("/-/ready")).status == 503
        deadline = time.monotonic() + 20
        while (await client.get("/-/ready")).status != 200:
            assert time.monotonic() < deadline, "never ready"
            await asyncio.sleep(0.05)
        # Ready means the cycle that holds the Secrets' clusters is served.
        got = samples(await (await client.get("/metrics")).text())
        assert success(got, "slow-one") == 1
