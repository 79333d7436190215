"""Probes against the stand-in API server: every credential kind, every failure mode."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.model import Reason
from exporter.net import client as client_module
from exporter.net import credentials as credentials_module
from exporter.net.client import FleetClient, Slot
from exporter.net.credentials import (
    CredentialCache,
    Credentials,
    CredentialsError,
    build_credentials,
)
from fleetwatch.discovery import Cluster, ContextConfig, Discovery
from fleetwatch.discovery.clusters import probeable
from fleetwatch.discovery.contextauth import ContextAuth
from fleetwatch.discovery.kubeconfig import context_config
from fleetwatch.standin import StandinFleet
from tests.helpers.exporter_helpers import MonitorFactory

CREDENTIAL_KINDS = [
    ("client_cert_data", "data"),
    ("client_cert_files", "file"),
    ("token", "data"),
    ("token_file", "file"),
    ("exec_token", "data"),
    ("exec_cert", "file"),
    ("insecure", "data"),
]


@pytest.mark.live
@pytest.mark.parametrize(("credential", "ca"), CREDENTIAL_KINDS)
async def test_each_credential_kind_probes_successfully(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    make_monitor: MonitorFactory,
    credential: str,
    ca: str,
) -> None:
    await fleet.add_cluster("c1")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", ["c1"], credential=credential, ca=ca)  # type: ignore[arg-type]
    async with make_monitor(probe_timeout=5.0) as (monitor, rec):
        await monitor.run_cycle()
    view = rec.view("c1")
    assert view.success is True, monitor.states["c1"].last
    assert view.consecutive_failures == 0
    assert view.last_success > time.time() - 60
    assert fleet.requests("c1") == 1


@pytest.mark.live
async def test_token_file_with_trailing_newline(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("c1")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", ["c1"], credential="token_file")
    token_file = fleet.directory / "tokens" / "c1.token"
    assert token_file.read_text().endswith("\n")
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
    assert rec.view("c1").success is True


MODES = [
    ("down", Reason.CONNECT),
    ("hang", Reason.TIMEOUT),
    ("error", Reason.HTTP_ERROR),
    ("not_ready", Reason.NOT_READY),
    ("unauthorized", Reason.UNAUTHORIZED),
    ("wrong_ca", Reason.TLS),
]


@pytest.mark.live
async def test_each_failure_mode_is_success_0_with_its_reason(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    make_monitor: MonitorFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for mode, _ in MODES:
        await fleet.add_cluster(f"m-{mode}", mode)
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml")
    caplog.set_level("INFO")  # a cluster that starts failing is a change of state: INFO
    async with make_monitor(probe_timeout=1.0) as (monitor, rec):
        await monitor.run_cycle()
    for mode, reason in MODES:
        view = rec.view(f"m-{mode}")
        assert view.success is False, mode
        assert dict(view.failures) == {reason: 1}, mode
        assert view.consecutive_failures == 1
        assert view.last_success == 0
    assert monitor.states["m-not_ready"].last.failed_checks == ("etcd", "etcd-readiness")  # type: ignore[union-attr]
    assert "failed checks: etcd, etcd-readiness" in caplog.text


# A loaded machine runs the loop late: a wait's own bound (the resolution's, the proxy's)
# and the backstop of the whole probe can both be due before the loop runs either. The
# probe still says what it waited for, as when the loop is on time (at load 8-10 it said
# timeout instead, in the shared-plugin and hung-proxy tests).

HOLD_S = 0.5  #: the loop held this long, past a 0.2 s timeout


def hold_the_loop() -> None:
    time.sleep(HOLD_S)  # what a busy machine does to the loop; blocking it is the point


async def test_credentials_past_their_deadline_are_credentials_however_late_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module, "_BACKSTOP_S", 0.05)  # both due within the hold
    client = FleetClient(timeout=0.2, interval=60.0, environ={})
    ctx = ContextConfig("/nonexistent/kubeconfig", "c", (0, 0, 0, 0, 0), None)  # type: ignore[arg-type]

    async def hung(asked: ContextConfig) -> Any:
        hold_the_loop()  # both bounds armed, then both due
        await asyncio.Event().wait()  # and no answer ever comes

    monkeypatch.setattr(client.credentials, "resolve", hung)
    try:
        cluster = Cluster("c", "https://127.0.0.1:1/c", "/nonexistent/kubeconfig", "c")
        probed = await client.probe(cluster, ctx, Slot(None))
    finally:
        await client.aclose()
    assert probed.result.reason is Reason.CREDENTIALS, probed.result
    assert probed.result.detail == "resolving the credentials took longer than 0.2s"


async def test_a_hung_proxy_is_proxy_however_late_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = FleetClient(timeout=0.2, interval=60.0, environ={})
    ctx = ContextConfig("/nonexistent/kubeconfig", "c", (0, 0, 0, 0, 0), None)  # type: ignore[arg-type]

    async def resolved(asked: ContextConfig) -> tuple[Credentials, bool]:
        return Credentials(None, {}, None, None, False), True

    monkeypatch.setattr(client.credentials, "resolve", resolved)
    with socket.socket() as hung:  # accepts (the kernel's backlog does), never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        proxy = f"http://127.0.0.1:{hung.getsockname()[1]}"
        cluster = Cluster(
            "c", "http://127.0.0.1:1/c", "/nonexistent/kubeconfig", "c", proxy_url=proxy
        )
        asyncio.get_running_loop().call_later(0.1, hold_the_loop)  # in the CONNECT's wait
        try:
            probed = await client.probe(cluster, ctx, Slot(None))
        finally:
            await client.aclose()
    assert probed.result.reason is Reason.PROXY, probed.result
    assert probed.result.detail == f"proxy {proxy} did not answer CONNECT in time"


async def test_a_failure_nobody_waited_for_is_given_again_not_built_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every probe waiting on a hung plugin gave up first (its own bound, on a loaded
    machine), then the plugin failed: the next context that shares it gets that failure
    at once, without starting the plugin again (at load 8-10 it was started twice)."""
    cache = CredentialCache(plugin_timeout=5.0)
    release = threading.Event()

    def hung_then_failed(*args: object) -> Credentials:
        release.wait(10)
        raise CredentialsError("the plugin gave no answer")

    monkeypatch.setattr(credentials_module, "build_credentials", hung_then_failed)
    ctx = ContextConfig("/k", "c", (0, 0, 0, 0, 0), ContextAuth(https=True))
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):  # the probe's own bound
                await cache.resolve(ctx)
        release.set()
        deadline = time.monotonic() + 10
        while not all(b.done() for b in cache._building.values()):  # the failure arrived
            assert time.monotonic() < deadline, "the build never ended"
            await asyncio.sleep(0.01)
        with pytest.raises(CredentialsError, match="the plugin gave no answer"):
            await cache.resolve(ctx)
        assert cache.builds == 1
    finally:
        release.set()
        cache.close()


@pytest.mark.live
async def test_unresolvable_credentials_are_reason_credentials(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("c1")
    path = fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", ["c1"], credential="client_cert_files")
    path.write_text(path.read_text().replace(str(fleet.certs.files.client_key), "/nonexistent.key"))
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
    view = rec.view("c1")
    assert (view.success, dict(view.failures)) == (False, {Reason.CREDENTIALS: 1})
    assert fleet.requests("c1") == 0


@pytest.mark.live
async def test_consecutive_failures_count_up_and_reset(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("c1", "error")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml")
    async with make_monitor() as (monitor, rec):
        for expected in (1, 2, 3):
            await monitor.run_cycle()
            assert rec.view("c1").consecutive_failures == expected
        await fleet.set_mode("c1", "ok")
        await monitor.run_cycle()
        view = rec.view("c1")
        assert (view.success, view.consecutive_failures) == (True, 0)
        assert dict(view.failures) == {Reason.HTTP_ERROR: 3}
        await fleet.set_mode("c1", "down")
        await monitor.run_cycle()
        assert rec.view("c1").consecutive_failures == 1
        assert rec.view("c1").last_success > 0


@pytest.mark.live
async def test_one_hung_cluster_does_not_delay_the_others(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("hung", "hang")
    await fleet.add_clusters(4, prefix="ok")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    timeout = 1.0
    async with make_monitor(probe_timeout=timeout, concurrency=8) as (monitor, rec):
        await monitor.run_cycle()  # warm: credentials resolved, connections open
        started = time.monotonic()
        await monitor.run_cycle()
        elapsed = time.monotonic() - started
    assert elapsed < timeout + 1.0
    assert dict(rec.view("hung").failures) == {Reason.TIMEOUT: 2}
    for i in range(1, 5):
        view = rec.view(f"ok-00{i}")
        assert view.success is True
        # answered while the hung one was still waiting: one held behind it waits a timeout
        assert view.duration < timeout


class _StaticDiscovery:
    """A discovery source returning fixed clusters: the reactor's Secret-name case."""

    def __init__(self, clusters: tuple[Cluster, ...]) -> None:
        self.clusters = clusters

    def scan(self) -> Discovery:
        return Discovery(self.clusters, ())

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        return None

    def probeable(self, ref: str) -> bool:
        return probeable(ref)  # files are looked at


async def test_unprobeable_cluster_is_never_probed_nor_failing(
    make_monitor: MonitorFactory, caplog: pytest.LogCaptureFixture
) -> None:
    secret = Cluster("prod", "https://127.0.0.1:1", "kube-system/prod-kubeconfig", "prod")
    async with make_monitor(discovery=_StaticDiscovery((secret,))) as (monitor, rec):
        for _ in range(3):
            await monitor.run_cycle()
    view = rec.view("prod")
    assert (view.probeable, view.success, view.consecutive_failures) == (False, None, 0)
    assert view.failures == ()
    assert monitor.probes_started == 0
    warnings = [r for r in caplog.records if "is not a readable file" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.live
async def test_vanished_cluster_state_is_dropped_and_new_file_probed(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("a", "error")
    await fleet.add_cluster("b")
    fleet.write_kubeconfig(kubeconfig_dir / "a.yaml", ["a"])
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
        assert [v.cluster.name for v in rec.last.clusters] == ["a"]
        (kubeconfig_dir / "a.yaml").unlink()
        fleet.write_kubeconfig(kubeconfig_dir / "b.yaml", ["b"])
        await monitor.run_cycle()
    assert [v.cluster.name for v in rec.last.clusters] == ["b"]
    assert rec.view("b").success is True
    assert set(monitor.states) == {"b"}


@pytest.mark.live
async def test_connections_are_kept_alive_between_cycles(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    await fleet.add_cluster("c1")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential="token")
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
        await monitor.run_cycle()
        await monitor.run_cycle()
        assert monitor.client.credentials.builds == 1
        # one pooled connection serves all three probes
        assert (monitor.client.http.opened, monitor.client.http.idle) == (1, 1)
    assert rec.view("c1").success is True


async def test_dead_keepalive_connection_is_retried_once(
    kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    """A server that closes each kept-alive connection without answering its 2nd request."""
    handlers: list[asyncio.Task[object]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        await reader.readuntil(b"\r\n\r\n")
        body = b"[+]ping ok\nreadyz check passed\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        with contextlib.suppress(asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")  # the next request on this connection: drop it
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    doc = {
        "clusters": [{"name": "p", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "contexts": [{"name": "plain", "context": {"cluster": "p"}}],
    }
    (kubeconfig_dir / "plain.yaml").write_text(yaml.safe_dump(doc))
    async with server, make_monitor() as (monitor, rec):
        for _ in range(3):
            await monitor.run_cycle()
            assert rec.view("plain").success is True, monitor.states["plain"].last
        server.close()
    # The monitor closed its connections: each handler sees the end of its stream and ends.
    async with asyncio.timeout(5):
        await asyncio.gather(*handlers)


@pytest.mark.live
@pytest.mark.parametrize("credential", ["exec_token", "token_file"])
async def test_rotated_token_is_fetched_again_after_a_401(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory, credential: str
) -> None:
    cluster = await fleet.add_cluster("c1")
    fleet.write_kubeconfig(kubeconfig_dir / "k.yaml", credential=credential)  # type: ignore[arg-type]
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
        assert rec.view("c1").success is True
        # the token is rotated: the cached one is now refused, the file has the new one
        cluster.token = "rotated-token-0123456789"
        (fleet.directory / "tokens" / "c1.token").write_text(cluster.token + "\n")
        await monitor.run_cycle()
    view = rec.view("c1")
    assert (view.success, view.consecutive_failures, view.failures) == (True, 0, ())
    assert monitor.client.credentials.builds == 2


@pytest.mark.live
async def test_cached_credentials_refused_on_a_context_new_to_the_exporter_are_fetched_again(
    fleet: StandinFleet, kubeconfig_dir: Path, tmp_path: Path, make_monitor: MonitorFactory
) -> None:
    """A new context whose user another context resolved already: its first probe resolves
    (and finds them cached), so a 401 is retried once there too, with credentials anew."""
    first = await fleet.add_cluster("c1")
    second = await fleet.add_cluster("c2")
    second.token = first.token
    old = fleet.write_kubeconfig(kubeconfig_dir / "k1.yaml", ["c1"], credential="token_file")
    token_file = fleet.directory / "tokens" / "c1.token"
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
        assert rec.view("c1").success is True
        first.token = second.token = "rotated-token-0123456789"
        token_file.write_text(first.token + "\n")
        written = fleet.write_kubeconfig(tmp_path / "k2.yaml", ["c2"], credential="token_file")
        doc = yaml.safe_load(written.read_text())
        doc["users"][0]["user"]["tokenFile"] = str(token_file)  # c1's user, shared
        (kubeconfig_dir / "k2.yaml").write_text(yaml.safe_dump(doc))
        old.unlink()
        await monitor.run_cycle()
    view = rec.view("c2")
    assert (view.success, view.consecutive_failures, view.failures) == (True, 0, ())
    assert monitor.client.credentials.builds == 2  # the cached ones, then once more
    assert fleet.requests("c2") == 2  # refused, then answered


@pytest.mark.live
async def test_expired_exec_credential_is_fetched_again(
    fleet: StandinFleet, kubeconfig_dir: Path, tmp_path: Path, make_monitor: MonitorFactory
) -> None:
    cluster = await fleet.add_cluster("c1")
    plugin = tmp_path / "plugin.py"
    status = {"token": cluster.token, "expirationTimestamp": "2020-01-01T00:00:00Z"}
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',\n"
        f"  'kind': 'ExecCredential', 'status': {status!r}}}))\n"
    )
    doc = yaml.safe_load(fleet.write_kubeconfig(kubeconfig_dir / "k.yaml").read_text())
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
        }
    }
    (kubeconfig_dir / "k.yaml").write_text(yaml.safe_dump(doc))
    async with make_monitor() as (monitor, rec):
        for _ in range(2):
            await monitor.run_cycle()
            assert rec.view("c1").success is True
    assert monitor.client.credentials.builds == 2  # expired at once: fetched every cycle


@pytest.mark.live
async def test_failing_exec_plugin_is_reason_credentials(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    make_monitor: MonitorFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await fleet.add_cluster("c1")
    doc = yaml.safe_load(fleet.write_kubeconfig(kubeconfig_dir / "k.yaml").read_text())
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", "import sys; sys.exit('leaked-secret-on-stderr')"],
        }
    }
    (kubeconfig_dir / "k.yaml").write_text(yaml.safe_dump(doc))
    caplog.set_level(logging.DEBUG)
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
    assert dict(rec.view("c1").failures) == {Reason.CREDENTIALS: 1}
    assert fleet.requests("c1") == 0
    last = monitor.states["c1"].last
    assert last is not None and last.detail == "exec: process returned 1"
    assert "exec: process returned 1" in caplog.text
    assert "leaked-secret" not in caplog.text  # stderr is never read, never quoted


@pytest.mark.live
async def test_same_embedded_certs_resolved_by_many_threads_at_once(
    fleet: StandinFleet, kubeconfig_dir: Path
) -> None:
    """The kubernetes client writes ``*-data`` to temp files it shares by content; a thread
    must never get a file another thread has not finished writing."""
    await fleet.add_cluster("c1")
    doc = yaml.safe_load(fleet.write_kubeconfig(kubeconfig_dir / "k.yaml").read_text())
    ca_pem = fleet.certs.ca_pem
    errors: list[str] = []
    for round_ in range(30):
        # new content each round (a PEM comment), so the client's temp file is new too
        pem = ca_pem + f"# round {round_} {time.time()}\n".encode()
        cluster = doc["clusters"][0]["cluster"]
        cluster["certificate-authority-data"] = base64.b64encode(pem).decode()
        ctx = context_config(copy.deepcopy(doc), "c1", "k.yaml", (0, 0, round_, 0))
        barrier = threading.Barrier(8)

        def build(ctx: ContextConfig = ctx, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                build_credentials(ctx)
            except CredentialsError as exc:
                errors.append(str(exc))

        threads = [threading.Thread(target=build) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
