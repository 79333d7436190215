"""Clusters behind an HTTP proxy: a real tinyproxy (Debian's) between the probe and the API.

tinyproxy runs with its own config file on 127.0.0.1 and a free port, in the foreground
(``-d``), logging at Info to a file in the test's folder, and is stopped by its pid; its
log shows every ``CONNECT`` it tunnels. Without a ``ConnectPort`` line tinyproxy allows
``CONNECT`` to any port (``ConnectPort 0`` would forbid them all), which the stand-in's
random ports need; one test restricts it to 443 to get a real refusal.

The kubeconfig's ``proxy-url`` is always honoured, also for ``127.0.0.1``; the
environment's ``HTTPS_PROXY`` is not used for loopback servers (as in Go), so a cluster
reachable *only* through the proxy needs another network: see
``test_exporter_proxy_netns.py``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.cycle import Monitor
from exporter.expose.render import render_metrics
from exporter.expose.textformat import EncodedChecks
from exporter.model import CheckResult, CycleSettings, MetricFamily, ProbeResult, Reason, Sample
from exporter.net import ApiClient
from exporter.net.proxy import EnvironmentProxies, Proxy, ProxyError, parse_proxy, select
from fleetwatch.discovery import Cluster, Discoverer
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import StandinFleet
from tests.helpers.exporter_helpers import Recorder

TINYPROXY = "/usr/bin/tinyproxy"
SECRET = "pr0xy-s3cret-pass"


class Tinyproxy:
    """One tinyproxy process: its port, its log, stopped by pid."""

    def __init__(self, folder: Path, extra: str = "", listen: str = "127.0.0.1") -> None:
        self.folder = folder
        self.listen = listen
        self.port = free_port()
        self.log = folder / "tinyproxy.log"
        conf = folder / "tinyproxy.conf"
        conf.write_text(
            f"Port {self.port}\n"
            f"Listen {listen}\n"
            "Timeout 30\n"
            f'LogFile "{self.log}"\n'
            "LogLevel Info\n"
            f'PidFile "{folder / "tinyproxy.pid"}"\n'
            "MaxClients 50\n" + extra
        )
        self.process = ManagedProcess([TINYPROXY, "-d", "-c", str(conf)], folder / "stdout.log")

    @property
    def url(self) -> str:
        return f"http://{self.listen}:{self.port}"

    def start(self, prefix: list[str] | None = None) -> Tinyproxy:
        if prefix:
            self.process.argv = [*prefix, *self.process.argv]
        self.process.start()

        def accepting() -> bool:
            if not self.process.alive():
                raise AssertionError(f"tinyproxy exited:\n{self.process.log_tail()}")
            return "Accepting connections" in self.log_text()

        wait_until(accepting, 10, what="tinyproxy accepting")
        return self

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def connects(self) -> list[str]:
        return [line for line in self.log_text().splitlines() if ": CONNECT " in line]

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture
def tinyproxy(tmp_path: Path) -> Iterator[Callable[..., Tinyproxy]]:
    assert shutil.which(TINYPROXY), "tinyproxy is missing: scripts/install.sh installs it"
    started: list[Tinyproxy] = []

    def start(extra: str = "") -> Tinyproxy:
        folder = tmp_path / f"tinyproxy-{len(started)}"
        folder.mkdir()
        proxy = Tinyproxy(folder, extra).start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


def write_kubeconfig(
    fleet: StandinFleet, path: Path, names: list[str], proxy_url: str | None
) -> Path:
    """The stand-in's kubeconfig for ``names``, each cluster entry with ``proxy-url``."""
    fleet.write_kubeconfig(path, names)
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    if proxy_url is not None:
        for entry in doc["clusters"]:
            entry["cluster"]["proxy-url"] = proxy_url
    path.write_text(yaml.safe_dump(doc))
    return path


class PodsCheck:
    """A check that reads kube-system's pods through the probe's client (and its proxy)."""

    name = "pods"
    families = (MetricFamily("fleetwatch_test_pods", "gauge", "pods seen"),)

    async def run(self, cluster: Any, api: ApiClient, probe: ProbeResult) -> CheckResult | None:
        pods = await api.get_json("/api/v1/namespaces/kube-system/pods", 2.0)
        return CheckResult(samples=(Sample("fleetwatch_test_pods", len(pods["items"])),))


@asynccontextmanager
async def monitor_of(
    folder: Path,
    *,
    probe_timeout: float = 2.0,
    environ: Mapping[str, str] | None = None,
    checks: tuple[Any, ...] = (),
) -> AsyncIterator[tuple[Monitor, Recorder]]:
    recorder = Recorder()
    settings = CycleSettings(interval=60.0, timeout=probe_timeout, concurrency=8)
    monitor = Monitor(settings, Discoverer(None, folder), recorder, checks, environ=environ or {})
    async with monitor:
        yield monitor, recorder


async def failed_at_the_proxy(
    fleet: StandinFleet, folder: Path, name: str, proxy_url: str, probe_timeout: float = 2.0
) -> tuple[ProbeResult, int]:
    """Cluster ``name`` behind ``proxy_url``, one cycle, which must fail at the proxy and
    never reach the cluster: its last probe, and the connections the exporter opened."""
    await fleet.add_cluster(name)
    write_kubeconfig(fleet, folder / f"{name}.yaml", [name], proxy_url)
    async with monitor_of(folder, probe_timeout=probe_timeout) as (monitor, rec):
        await monitor.run_cycle()
        view, last = rec.view(name), monitor.states[name].last
        opened = monitor.client.http.opened
    assert dict(view.failures) == {Reason.PROXY: 1}
    assert last is not None
    assert fleet.requests(name) == 0
    return last, opened


@pytest.mark.live
async def test_a_cluster_behind_tinyproxy_is_online_and_its_checks_go_through_it(
    fleet: StandinFleet, tmp_path: Path, kubeconfig_dir: Path, tinyproxy: Callable[..., Tinyproxy]
) -> None:
    proxy = tinyproxy()
    cluster = await fleet.add_cluster("px-ok")
    write_kubeconfig(fleet, kubeconfig_dir / "px.yaml", ["px-ok"], proxy.url)
    async with monitor_of(kubeconfig_dir, checks=(PodsCheck(),)) as (monitor, rec):
        await monitor.run_cycle()
        await monitor.run_cycle()
        view = rec.view("px-ok")
        assert view.success is True, view
        [encoded] = view.checks  # the check got its pods (kept encoded)
        assert isinstance(encoded, EncodedChecks)
        assert re.fullmatch(rb'fleetwatch_test_pods\{cluster="px-ok"\} [1-9]\d*\n', encoded.text)
        # One tunnel, kept alive: two probes and two checks, one CONNECT.
        assert monitor.client.http.opened == 1
    connects = proxy.connects()
    assert len(connects) == 1, proxy.log_text()
    assert f"CONNECT 127.0.0.1:{cluster.port} HTTP/1.1" in connects[0]
    assert fleet.requests("px-ok") == 4  # 2 x /readyz, 2 x pods


@pytest.mark.live
async def test_proxy_credentials_are_sent_and_never_logged_nor_exposed(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    tinyproxy: Callable[..., Tinyproxy],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = tinyproxy(f"BasicAuth fleetwatch {SECRET}\n")
    await fleet.add_clusters(2, "auth")
    good = f"http://fleetwatch:{SECRET}@127.0.0.1:{proxy.port}"
    bad = f"http://fleetwatch:not-{SECRET}@127.0.0.1:{proxy.port}"
    write_kubeconfig(fleet, kubeconfig_dir / "good.yaml", ["auth-001"], good)
    write_kubeconfig(fleet, kubeconfig_dir / "bad.yaml", ["auth-002"], bad)
    async with monitor_of(kubeconfig_dir) as (monitor, rec):
        await monitor.run_cycle()
        assert rec.view("auth-001").success is True
        assert dict(rec.view("auth-002").failures) == {Reason.PROXY: 1}
        refused = monitor.states["auth-002"].last
        assert refused is not None
        # tinyproxy answers 401, not the 407 of the RFC; either is the proxy's refusal
        expected = f"proxy http://127.0.0.1:{proxy.port} refused CONNECT: HTTP 401"
        assert refused.detail.startswith(expected), refused.detail
        exposition = render_metrics(rec.last).decode()
        assert 'reason="proxy"' in exposition
        states = repr(monitor.states)
    assert len(proxy.connects()) == 2
    for text in (caplog.text, exposition, states, refused.detail):
        assert SECRET not in text
        assert "fleetwatch:" not in text  # no user:password@ at all


@pytest.mark.live
async def test_a_refusing_proxy_is_reason_proxy(fleet: StandinFleet, kubeconfig_dir: Path) -> None:
    closed = free_port()  # nobody listens there
    url = f"http://127.0.0.1:{closed}"
    last, _ = await failed_at_the_proxy(fleet, kubeconfig_dir, "px-refused", url, 1.0)
    assert f"cannot connect to the proxy http://127.0.0.1:{closed}" in last.detail


@pytest.mark.live
async def test_a_hanging_proxy_is_reason_proxy_within_the_timeout(
    fleet: StandinFleet, kubeconfig_dir: Path
) -> None:
    """The proxy accepts the connection (the kernel's backlog does) and never answers."""
    await fleet.add_cluster("px-hung")
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        port = hung.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        write_kubeconfig(fleet, kubeconfig_dir / "h.yaml", ["px-hung"], url)
        async with monitor_of(kubeconfig_dir, probe_timeout=0.5) as (monitor, rec):
            started = time.monotonic()
            await monitor.run_cycle()
            elapsed = time.monotonic() - started
            view, last = rec.view("px-hung"), monitor.states["px-hung"].last
    assert dict(view.failures) == {Reason.PROXY: 1}, last
    assert last is not None
    assert last.detail == f"proxy {url} did not answer CONNECT in time"
    # It waited, and ended at the 0.5 s timeout: without it, a CONNECT nobody answers
    # waits for ever; the upper bounds leave a loaded machine seconds of slack.
    assert 0.3 <= last.duration < 2.5
    assert elapsed < 5.0


@pytest.mark.live
async def test_a_hanging_proxy_takes_no_slot_while_it_hangs(
    fleet: StandinFleet, kubeconfig_dir: Path
) -> None:
    """12 clusters behind a hung proxy, 2 slots, 2 s timeout: one timeout, not six.

    Waiting for a tunnel is no work, so it is not under a slot: otherwise a proxy that
    hangs in front of many clusters would hold every slot for a whole timeout, batch
    after batch, and the clusters not behind it would wait too.
    """
    behind = await fleet.add_clusters(12, "px-many")
    direct = await fleet.add_cluster("px-direct")
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        write_kubeconfig(fleet, kubeconfig_dir / "many.yaml", [c.name for c in behind], url)
        write_kubeconfig(fleet, kubeconfig_dir / "direct.yaml", [direct.name], None)
        recorder = Recorder()
        # 2 s: at load 10-12, a 1 s deadline sometimes passed before a probe reached the
        # proxy at all (a timeout, not a proxy failure)
        settings = CycleSettings(interval=60.0, timeout=2.0, concurrency=2)
        discovery = Discoverer(None, kubeconfig_dir)
        async with Monitor(settings, discovery, recorder, environ={}) as monitor:
            started = time.monotonic()
            await monitor.run_cycle()
            elapsed = time.monotonic() - started
    assert recorder.view(direct.name).success is True
    failures = {c.name: dict(recorder.view(c.name).failures) for c in behind}
    assert all(f == {Reason.PROXY: 1} for f in failures.values()), failures
    assert elapsed < 6.0, elapsed  # holding slots while hung: 6 x 2 s at least; halfway


@pytest.mark.live
async def test_a_hung_server_behind_a_working_proxy_is_a_timeout_and_reconnects_through_it(
    fleet: StandinFleet, kubeconfig_dir: Path, tinyproxy: Callable[..., Tinyproxy]
) -> None:
    """The tunnel opened, the API server never answered: the server's fault, ``timeout``."""
    proxy = tinyproxy()
    await fleet.add_cluster("px-slow", "hang")
    write_kubeconfig(fleet, kubeconfig_dir / "s.yaml", ["px-slow"], proxy.url)
    async with monitor_of(kubeconfig_dir, probe_timeout=0.5) as (monitor, rec):
        await monitor.run_cycle()
        assert dict(rec.view("px-slow").failures) == {Reason.TIMEOUT: 1}
        reconnect = monitor.client.reconnecting("px-slow")
        assert reconnect is not None
        await reconnect  # the connection for the next probe, opened after the cycle
        assert monitor.client.http.idle == 1
    assert len(proxy.connects()) == 2, proxy.log_text()  # the probe's, the reconnection's


@pytest.mark.live
async def test_a_proxy_refusing_the_port_is_reason_proxy(
    fleet: StandinFleet, kubeconfig_dir: Path, tinyproxy: Callable[..., Tinyproxy]
) -> None:
    proxy = tinyproxy("ConnectPort 443\n")  # CONNECT only to 443: the stand-in is elsewhere
    await fleet.add_cluster("px-port")
    write_kubeconfig(fleet, kubeconfig_dir / "p.yaml", ["px-port"], proxy.url)
    async with monitor_of(kubeconfig_dir) as (monitor, rec):
        await monitor.run_cycle()
        view, last = rec.view("px-port"), monitor.states["px-port"].last
    assert dict(view.failures) == {Reason.PROXY: 1}
    assert last is not None
    assert "refused CONNECT: HTTP 403" in last.detail, last.detail
    assert fleet.requests("px-port") == 0


@pytest.mark.live
@pytest.mark.parametrize(
    ("proxy_url", "detail"),
    [
        ("socks5://127.0.0.1:1080", "proxy-url: socks5:// proxies are not supported, only http://"),
        (
            "https://proxy.example:3128",
            "proxy-url: https:// proxies are not supported, only http://",
        ),
        ("http://127.0.0.1:99999", "proxy-url is not a valid URL"),
    ],
)
async def test_a_proxy_url_we_cannot_use_is_reason_proxy_and_nothing_is_tried(
    fleet: StandinFleet, kubeconfig_dir: Path, proxy_url: str, detail: str
) -> None:
    last, opened = await failed_at_the_proxy(fleet, kubeconfig_dir, "px-bad", proxy_url)
    assert opened == 0
    assert last.detail == detail


@pytest.mark.live
async def test_https_proxy_of_the_environment_is_not_used_for_loopback_servers(
    fleet: StandinFleet, kubeconfig_dir: Path
) -> None:
    """As Go: ``HTTPS_PROXY`` never applies to ``localhost`` or a loopback address."""
    await fleet.add_cluster("px-loop")
    write_kubeconfig(fleet, kubeconfig_dir / "l.yaml", ["px-loop"], None)
    dead = f"http://127.0.0.1:{free_port()}"
    async with monitor_of(kubeconfig_dir, environ={"HTTPS_PROXY": dead}) as (monitor, rec):
        await monitor.run_cycle()
        assert rec.view("px-loop").success is True


@pytest.mark.live
async def test_a_changed_proxy_gets_a_new_connection(
    fleet: StandinFleet, kubeconfig_dir: Path, tinyproxy: Callable[..., Tinyproxy]
) -> None:
    """The proxy is part of the connection's identity: a new one is used at once."""
    first, second = tinyproxy(), tinyproxy()
    await fleet.add_cluster("px-moved")
    path = kubeconfig_dir / "m.yaml"
    write_kubeconfig(fleet, path, ["px-moved"], first.url)
    async with monitor_of(kubeconfig_dir) as (monitor, rec):
        await monitor.run_cycle()
        write_kubeconfig(fleet, path, ["px-moved"], second.url)
        await monitor.run_cycle()
        await monitor.run_cycle()
        assert rec.view("px-moved").success is True
        assert monitor.client.http.opened == 2
        assert monitor.client.http.held == 1  # the tunnel through the first proxy is closed
    assert len(first.connects()) == 1
    assert len(second.connects()) == 1


@pytest.mark.live
async def test_cancelled_waits_leave_no_task(fleet: StandinFleet, kubeconfig_dir: Path) -> None:
    """A hung proxy's timeout leaves no reconnection behind (reason proxy is not timeout)."""
    await fleet.add_cluster("px-quiet")
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        write_kubeconfig(fleet, kubeconfig_dir / "q.yaml", ["px-quiet"], url)
        async with monitor_of(kubeconfig_dir, probe_timeout=0.3) as (monitor, _):
            await monitor.run_cycle()
            assert monitor.client.reconnecting("px-quiet") is None


# -- which proxy: the kubeconfig's, else the environment's, as Go's httpproxy ----------

ENV = {"HTTPS_PROXY": "proxy.corp:3128", "HTTP_PROXY": "http://plain.corp:8080"}
#: NO_PROXY's addresses and ranges cannot be loopback ones (never proxied, whatever it says):
#: they are in 192.0.2.0/24 and 198.51.100.0/24, kept by RFC 5737 for documentation. Nothing
#: connects to them: only which proxy would be used is asked.


@pytest.mark.parametrize(
    ("no_proxy", "host", "port", "proxied"),
    [
        ("", "api.prod.example", 6443, True),
        ("", "localhost", 6443, False),  # never for loopback, as Go
        ("", "127.0.0.1", 6443, False),
        ("", "127.0.0.2", 6443, False),
        ("", "::1", 6443, False),
        ("", "::ffff:127.0.0.1", 6443, False),  # IPv4-mapped loopback: Go's To4 sees 127
        ("", "[::ffff:127.0.0.1]", 6443, False),
        ("192.0.2.0/24", "::ffff:192.0.2.3", 6443, False),  # Go's IPNet.Contains maps it too
        ("192.0.2.1", "::ffff:192.0.2.1", 6443, False),  # and IP.Equal
        ("", "::ffff:192.0.2.1", 6443, True),
        ("", "192.0.2.1", 6443, True),
        ("*", "api.prod.example", 6443, False),
        ("example", "api.prod.example", 6443, False),  # a suffix of labels
        ("prod.example", "prod.example", 6443, False),  # without a dot: the host too
        ("prod.example", "xprod.example", 6443, True),  # not a label boundary
        (".prod.example", "api.prod.example", 6443, False),
        (".prod.example", "prod.example", 6443, True),  # with a dot: sub-domains only
        ("*.prod.example", "api.prod.example", 6443, False),
        ("*.prod.example", "prod.example", 6443, True),
        ("prod.example:6443", "api.prod.example", 6443, False),
        ("prod.example:443", "api.prod.example", 6443, True),  # another port
        ("192.0.2.1", "192.0.2.1", 6443, False),
        ("192.0.2.1:6443", "192.0.2.1", 6443, False),
        ("192.0.2.1:443", "192.0.2.1", 6443, True),
        ("192.0.2.0/24", "192.0.2.40", 6443, False),
        ("192.0.2.0/24", "198.51.100.1", 6443, True),
        ("fd00::/8", "fd00::1", 6443, False),
        ("[fd00::1]:6443", "fd00::1", 6443, False),
        (" API.Prod.Example , other", "api.prod.example", 6443, False),  # trimmed, any case
        ("192.0.2.0/24", "ten.example", 6443, True),  # a range never matches a name
    ],
)
def test_no_proxy_matches_as_go_does(no_proxy: str, host: str, port: int, proxied: bool) -> None:
    env = EnvironmentProxies({**ENV, "NO_PROXY": no_proxy})
    found = env.for_host(True, host, port)
    assert (found is not None) is proxied
    if found is not None:
        assert (found.host, found.port) == ("proxy.corp", 3128)  # no scheme: http://


def test_the_environment_by_scheme_lowercase_too_and_the_kubeconfig_first() -> None:
    env = EnvironmentProxies(ENV)
    assert env.for_host(False, "api.example", 80) == Proxy("plain.corp", 8080)
    lower = EnvironmentProxies({"https_proxy": "http://low.corp:1", "no_proxy": "skip.example"})
    assert lower.for_host(True, "api.example", 443) == Proxy("low.corp", 1)
    assert lower.for_host(True, "skip.example", 443) is None
    assert lower.for_host(False, "api.example", 80) is None  # no HTTP_PROXY
    # The kubeconfig's proxy-url wins, loopback or not.
    chosen = select("http://mine:9", env, True, "127.0.0.1", 6443)
    assert chosen == Proxy("mine", 9)
    assert select(None, EnvironmentProxies({}), True, "api.example", 443) is None


def test_proxy_credentials_become_a_header_and_stay_out_of_labels_and_repr() -> None:
    proxy = parse_proxy(f"http://us%40er:{SECRET}@proxy.corp:3128")
    assert proxy.label == "http://proxy.corp:3128"
    assert SECRET not in repr(proxy)
    request = proxy.connect_request("api.example", 6443).decode()
    assert request.startswith("CONNECT api.example:6443 HTTP/1.1\r\nHost: api.example:6443\r\n")
    token = base64.b64encode(f"us@er:{SECRET}".encode()).decode()
    assert f"Proxy-Authorization: Basic {token}\r\n" in request
    assert (
        parse_proxy("http://[fd00::1]:3128")
        .connect_request("fd00::2", 443)
        .startswith(b"CONNECT [fd00::2]:443 HTTP/1.1")
    )


def test_an_unusable_environment_proxy_is_an_error_naming_the_variable() -> None:
    env = EnvironmentProxies({"HTTPS_PROXY": f"socks5://u:{SECRET}@127.9.9.9:1080"})
    with pytest.raises(ProxyError) as caught:
        env.for_host(True, "api.example", 443)
    assert str(caught.value) == "HTTPS_PROXY: socks5:// proxies are not supported, only http://"
    cluster = Cluster("c", "https://api.example", "/k", "c", f"http://u:{SECRET}@p:1")
    assert SECRET not in repr(cluster)


# -- a cluster reachable only through the proxy ------------------------------------------


class HiddenNetwork:
    """A network namespace holding a stand-in cluster and tinyproxy, and nothing else.

    The cluster's API server listens on the namespace's own loopback, under a name,
    ``api.hidden.fleet.test``, that resolves only inside it (``ip netns exec`` puts
    ``/etc/netns/<ns>/hosts`` in place of ``/etc/hosts``), as a private DNS name resolves
    only inside a corporate network. tinyproxy, inside too, listens on a veth address
    that this process reaches. So the exporter can neither resolve nor reach the server
    itself: only a ``CONNECT`` through tinyproxy gets there.
    """

    HOST = "api.hidden.fleet.test"

    def __init__(self, tmp: Path) -> None:
        pid = os.getpid()
        self.ns = f"fwpx{pid % 100000}"
        self.veth = (f"{self.ns}h", f"{self.ns}n")
        third, fourth = (pid // 64) % 250, (pid % 64) * 4
        self.host_ip, self.ns_ip = f"10.231.{third}.{fourth + 1}", f"10.231.{third}.{fourth + 2}"
        self.etc = Path("/etc/netns") / self.ns
        self.tmp = tmp
        self.processes: list[ManagedProcess] = []

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.ns]

    def up(self) -> HiddenNetwork:
        self.ip("netns", "add", self.ns)
        self.etc.mkdir(parents=True, exist_ok=True)
        (self.etc / "hosts").write_text(f"127.0.0.1 localhost\n127.0.0.1 {self.HOST}\n")
        host_side, ns_side = self.veth
        self.ip("link", "add", host_side, "type", "veth", "peer", "name", ns_side)
        self.ip("link", "set", ns_side, "netns", self.ns)
        self.ip("addr", "add", f"{self.host_ip}/30", "dev", host_side)
        self.ip("link", "set", host_side, "up")
        inside = ["netns", "exec", self.ns, "ip"]
        self.ip(*inside, "addr", "add", f"{self.ns_ip}/30", "dev", ns_side)
        self.ip(*inside, "link", "set", ns_side, "up")
        self.ip(*inside, "link", "set", "lo", "up")
        return self

    def standin(self) -> dict[str, Any]:
        """One stand-in cluster inside; its summary (URL, kubeconfig path)."""
        folder = self.tmp / "hidden-standin"
        argv = [*self.exec_prefix(), sys.executable, "-m", "fleetwatch.standin", "serve"]
        argv += ["--clusters", "1", "--prefix", "hidden", "--dir", str(folder)]
        process = ManagedProcess(argv, self.tmp / "hidden-standin.log", cwd=REPO)
        self.processes.append(process.start())

        def summary() -> dict[str, Any] | None:
            if not process.alive():
                raise AssertionError(f"the stand-in exited:\n{process.log_tail()}")
            for line in process.log_path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    found: dict[str, Any] = json.loads(line)
                    return found
            return None

        return wait_until(summary, 30, what="the hidden stand-in")

    def down(self) -> None:
        for process in self.processes:
            process.stop()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", self.veth[0]], capture_output=True, timeout=10)
        shutil.rmtree(self.etc, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.etc.parent.rmdir()  # only if no other namespace has files there


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def hidden(tmp_path: Path) -> Iterator[HiddenNetwork]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("a network namespace needs root and iproute2")
    network = HiddenNetwork(tmp_path)
    try:
        yield network.up()
    finally:
        network.down()


@pytest.mark.live
async def test_a_cluster_reachable_only_through_the_proxy_is_online(
    hidden: HiddenNetwork, tmp_path: Path
) -> None:
    cluster = hidden.standin()["clusters"][0]
    port = int(cluster["url"].rsplit(":", 1)[1])
    (tmp_path / "hidden-proxy").mkdir()
    proxy = Tinyproxy(tmp_path / "hidden-proxy", listen=hidden.ns_ip)
    proxy.start(prefix=hidden.exec_prefix())
    hidden.processes.append(proxy.process)
    name = cluster["name"]

    def kubeconfig(folder: str, proxy_url: str | None) -> Path:
        doc: dict[str, Any] = yaml.safe_load(Path(cluster["kubeconfig"]).read_text())
        entry = doc["clusters"][0]["cluster"]
        entry["server"] = f"https://{HiddenNetwork.HOST}:{port}"
        entry["tls-server-name"] = "localhost"  # a name of the stand-in's certificate
        if proxy_url is not None:
            entry["proxy-url"] = proxy_url
        path = tmp_path / folder / "hidden.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(doc))
        return path.parent

    async def probe_once(folder: Path, environ: Mapping[str, str]) -> tuple[bool | None, Any]:
        async with monitor_of(folder, environ=environ) as (monitor, rec):
            await monitor.run_cycle()
            return rec.view(name).success, monitor.states[name].last

    # Directly: the name does not even resolve here.
    ok, last = await probe_once(kubeconfig("direct", None), {})
    assert (ok, last.reason) == (False, Reason.CONNECT), last
    # The kubeconfig's proxy-url.
    ok, last = await probe_once(kubeconfig("proxy-url", proxy.url), {})
    assert ok is True, last
    # HTTPS_PROXY of the environment, for a kubeconfig without proxy-url.
    environment = {"HTTPS_PROXY": proxy.url}
    ok, last = await probe_once(kubeconfig("env", None), environment)
    assert ok is True, last
    # ... unless NO_PROXY names the domain: then it is direct again, and fails.
    environment = {**environment, "NO_PROXY": "fleet.test"}
    ok, last = await probe_once(kubeconfig("no-proxy", None), environment)
    assert (ok, last.reason) == (False, Reason.CONNECT), last
    connects = proxy.connects()
    assert len(connects) == 2, proxy.log_text()
    assert all(f"CONNECT {HiddenNetwork.HOST}:{port} HTTP/1.1" in line for line in connects)
