"""Exec credential plugins that hang, or leave a child behind, cannot stall the exporter.

The kubernetes client waits for a plugin without a timeout. Before the plugins ran under
our own runner, a few hung plugins took every thread of the default executor, so discovery
and rendering stopped after the first cycle while ``/healthz`` said 200; SIGTERM left the
process waiting for those threads; and the client's temporary files (a client key among
them) stayed in ``$TMPDIR`` after ``kill -9``. These tests run a real ``fleetwatch
exporter`` against plugins that sleep forever and plugins whose child keeps their stdout
open, and check each of those points with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.config import kube_config
from prometheus_client.parser import text_string_to_metric_families

from exporter.model import Reason
from exporter.net.execplugin import ExecCredential, ExecPluginError, PluginRunner
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin import StandinFleet
from fleetwatch.standin.workload.threaded import ThreadedFleet
from tests.helpers.exporter_helpers import MonitorFactory
from tests.helpers.kubeconfig_docs import config_doc

#: Sleeps forever after saying its pid.
SLEEPS = """\
import os, sys, time
with open(sys.argv[1], "a") as out:
    out.write(f"{os.getpid()}\\n")
time.sleep(1e6)
"""

#: Starts a child that keeps stdout open and sleeps, says both pids, and exits.
FORKS = """\
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1e6)", sys.argv[2]])
with open(sys.argv[1], "a") as out:
    out.write(f"{os.getpid()}\\n{child.pid}\\n")
"""

HUNG = 4  #: fewer than the default executor's 6 threads on two cores: it stalls after a few cycles


@dataclass
class Setup:
    fleet: ThreadedFleet
    folder: Path  #: the kubeconfig folder
    tmpdir: Path  #: the exporter's $TMPDIR
    pids: Path  #: the plugins' pid lists
    marker: str  #: in every plugin's command line

    def plugin_pids(self) -> list[int]:
        out: list[int] = []
        for path in self.pids.iterdir():
            out += [int(line) for line in path.read_text().split()]
        return out

    def live_plugins(self) -> list[int]:
        """Processes whose command line holds the marker (plugins and their children)."""
        live = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            zombie = stat.rpartition(")")[2].split()[0] == "Z"
            if self.marker.encode() in cmdline and not zombie:
                live.append(int(entry.name))
        return live

    def key_files(self) -> list[Path]:
        """Files under the exporter's $TMPDIR that hold a private key."""
        found = []
        for root, _, files in os.walk(self.tmpdir):
            for name in files:
                path = Path(root, name)
                try:
                    if b"PRIVATE KEY" in path.read_bytes():
                        found.append(path)
                except OSError:
                    pass
        return found


def _hung_kubeconfig(setup: Setup, endpoint: str, plugins: Path) -> dict[str, object]:
    clusters, users, contexts = [], [], []
    for i in range(HUNG):
        name = f"hung-{i}"
        script = plugins / ("sleeps.py" if i % 2 == 0 else "forks.py")
        clusters.append({"name": name, "cluster": {"server": endpoint}})
        users.append(
            {
                "name": name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": [str(script), str(setup.pids / name), setup.marker, str(i)],
                    }
                },
            }
        )
        contexts.append({"name": name, "context": {"cluster": name, "user": name}})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
        "current-context": "hung-0",
    }


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    with ThreadedFleet(tmp_path / "fleet") as fleet:
        fleet.add_cluster("ok")
        folder = tmp_path / "kubeconfigs"
        folder.mkdir()
        plugins = tmp_path / "plugins"
        plugins.mkdir()
        (plugins / "sleeps.py").write_text(SLEEPS)
        (plugins / "forks.py").write_text(FORKS)
        made = Setup(
            fleet,
            folder,
            tmp_path / "tmp",
            tmp_path / "pids",
            f"fw-hung-{uuid.uuid4().hex}",
        )
        made.tmpdir.mkdir()
        made.pids.mkdir()
        # An embedded client key: the kubernetes client writes such data to temp files.
        fleet.write_kubeconfig(folder / "ok.yaml", ["ok"], credential="client_cert_data")
        fleet.add_cluster("hung-api", "hang")  # and a probe that waits for its timeout
        fleet.write_kubeconfig(folder / "hung-api.yaml", ["hung-api"], credential="token")
        doc = _hung_kubeconfig(made, fleet.cluster("ok").url, plugins)
        (folder / "hung.yaml").write_text(yaml.safe_dump(doc))
        try:
            yield made
        finally:
            for pid in made.live_plugins():  # whatever a failed test left behind
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _exporter(setup: Setup, tmp_path: Path, interval: float, timeout: float) -> ManagedProcess:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "fleetwatch.cli",
        "exporter",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--kubeconfig.dir={setup.folder}",
        f"--probe.interval={interval:g}",
        f"--probe.timeout={timeout:g}",
        "--log.level=debug",
    ]
    env = {"KUBECONFIG": "", "KUBECONFIG_PATH": "", "TMPDIR": str(setup.tmpdir)}
    proc = ManagedProcess(
        argv, tmp_path / "exporter.log", ready_url=f"http://127.0.0.1:{port}/-/healthy", env=env
    )
    proc.base_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return proc


def _scrape(proc: ManagedProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    url = f"{proc.base_url}/metrics"  # type: ignore[attr-defined]
    with urllib.request.urlopen(url, timeout=2) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _cycles(proc: ManagedProcess) -> float:
    return _scrape(proc).get(("fleetwatch_exporter_cycles_total", ()), 0.0)


def _wait_plugins_started(setup: Setup, timeout: float) -> list[int]:
    # each sleeping plugin says one pid, each forking one two
    want = HUNG // 2 + 2 * (HUNG - HUNG // 2)

    def started() -> list[int] | None:
        pids = setup.plugin_pids()
        return pids if len(pids) >= want else None

    return wait_until(started, timeout, what="every hung plugin started")


@pytest.mark.live
def test_hung_plugins_never_stop_the_cycles(setup: Setup, tmp_path: Path) -> None:
    with _exporter(setup, tmp_path, interval=1.0, timeout=0.5) as proc:
        first_pids = _wait_plugins_started(setup, 20.0)
        wait_until(lambda: _cycles(proc) >= 1, 20.0, what="a first cycle")
        start = _cycles(proc)
        # One cycle a second: five more within fifteen seconds, however many plugins hang.
        wait_until(lambda: _cycles(proc) >= start + 5, 15.0, what=f"5 cycles after cycle {start:g}")
        samples = _scrape(proc)
        assert samples[("fleetwatch_cluster_probe_success", (("cluster", "ok"),))] == 1.0
        with urllib.request.urlopen(f"{proc.base_url}/-/ready", timeout=2) as resp:  # type: ignore[attr-defined]
            assert resp.status == 200
        for i in range(HUNG):
            key = (
                "fleetwatch_cluster_probe_failures_total",
                (("cluster", f"hung-{i}"), ("reason", "credentials")),
            )
            assert samples.get(key, 0.0) >= 1.0, key
        # The first plugins (and their children) were killed at their timeout.
        wait_until(
            lambda: not set(first_pids) & set(setup.live_plugins()),
            5.0,
            what="the first plugins and their children killed",
        )


@pytest.mark.live
def test_sigterm_ends_the_exporter_with_plugins_in_flight(setup: Setup, tmp_path: Path) -> None:
    with _exporter(setup, tmp_path, interval=60.0, timeout=30.0) as proc:
        _wait_plugins_started(setup, 20.0)
        wait_until(lambda: setup.fleet.requests("ok") >= 1, 20.0, what="the ok cluster probed")
        wait_until(lambda: setup.fleet.requests("hung-api") >= 1, 20.0, what="a probe in flight")
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)  # the process only, as Kubernetes does
        assert proc.proc is not None
        code = proc.proc.wait(20)
        took = time.monotonic() - sent
        print(f"SIGTERM to exit: {took:.2f}s")
        # the probe's 30 s timeout is what a plugin in flight would hold it for: half of it
        assert took < 15.0, f"SIGTERM took {took:.1f}s\n{proc.log_tail()}"
        assert code == 0, proc.log_tail()
        wait_until(lambda: not setup.live_plugins(), 10.0, what="every plugin process ended")
        assert setup.key_files() == []
        assert list(setup.tmpdir.iterdir()) == []


@pytest.mark.live
def test_kill_9_leaves_no_key_behind_and_plugins_end_at_their_deadline(
    setup: Setup, tmp_path: Path
) -> None:
    timeout = 3.0
    with _exporter(setup, tmp_path, interval=60.0, timeout=timeout) as proc:
        _wait_plugins_started(setup, 20.0)
        wait_until(lambda: setup.fleet.requests("ok") >= 1, 20.0, what="the ok cluster probed")
        assert setup.key_files() == []  # not even while it runs
        killed = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.proc is not None
        proc.proc.wait(10)
    assert setup.key_files() == []
    # No code of ours runs after kill -9: the plugins' own deadline ends them.
    wait_until(lambda: not setup.live_plugins(), timeout + 5.0, what="orphaned plugins ended")
    print(f"orphans ended {time.monotonic() - killed:.2f}s after kill -9 (deadline {timeout:g}s)")


# -- the runner and the credential workers, in-process --------------------------------


def _exec_entry(script: Path, *args: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": [str(script), *args],
        **extra,
    }


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.parametrize("body", [SLEEPS, FORKS], ids=["sleeps", "forks"])
def test_a_hung_plugin_is_killed_with_its_children_at_its_deadline(
    tmp_path: Path, body: str
) -> None:
    script, pids = tmp_path / "plugin.py", tmp_path / "pids"
    script.write_text(body)
    runner = PluginRunner(0.5)
    started = time.monotonic()
    with pytest.raises(ExecPluginError, match=r"no answer within 0\.5s"):
        runner.run(_exec_entry(script, str(pids), "marker"), str(tmp_path))
    # at the 0.5 s deadline, not the plugin's sleep of days: ten deadlines of slack at load
    assert time.monotonic() - started < 5.0
    recorded = [int(p) for p in pids.read_text().split()]
    wait_until(lambda: not any(_alive(p) for p in recorded), 10.0, what="plugin group killed")
    assert runner.live() == 0
    runner.close()


def test_kill_all_ends_plugins_in_flight_and_refuses_new_ones(tmp_path: Path) -> None:
    script, pids = tmp_path / "plugin.py", tmp_path / "pids"
    script.write_text(SLEEPS)
    runner = PluginRunner(60.0)
    errors: list[str] = []

    def run() -> None:
        try:
            runner.run(_exec_entry(script, str(pids), "marker"), None)
        except ExecPluginError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, 10.0)
    recorded = [int(p) for p in pids.read_text().split()]
    killed = time.monotonic()
    runner.close()
    for t in threads:
        t.join(30.0)
    assert time.monotonic() - killed < 30.0  # not the plugins' 60 s timeout: they were killed
    assert len(errors) == 3, errors
    assert not any(_alive(p) for p in recorded)
    with pytest.raises(ExecPluginError, match="stopping"):
        runner.run(_exec_entry(script, str(pids)), None)


ANSWER = (
    "import json, os, sys\n"
    "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',\n"
    "  'kind': 'ExecCredential', 'status': STATUS}))\n"
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            ANSWER.replace(
                "STATUS", "{'token': 'tok', 'expirationTimestamp': '2030-01-01T00:00:00Z'}"
            ),
            ExecCredential(token="tok", expires_at=1893456000.0),
        ),
        (
            ANSWER.replace("STATUS", "{'clientCertificateData': 'C', 'clientKeyData': 'K'}"),
            ExecCredential(client_certificate=b"C", client_key=b"K"),
        ),
        (  # the plugin asked for the cluster: it sees the server, and its own env entry
            ANSWER.replace(
                "STATUS",
                "{'token': json.loads(os.environ['KUBERNETES_EXEC_INFO'])['spec']['cluster']"
                "['server'] + os.environ['EXTRA']}",
            ),
            ExecCredential(token="https://example.test:6443+extra"),
        ),
        ("import sys; sys.exit('secret-on-stderr')", "exec: process returned 1"),
        ("print('secret, not json')", "exec: the plugin's output is not JSON"),
        ("print('x' * (2 << 20))", "exec: the plugin wrote more than 1048576 bytes"),
        (
            ANSWER.replace("v1beta1'", "v1'").replace("STATUS", "{'token': 't'}"),
            "exec: plugin api version client.authentication.k8s.io/v1 does not match "
            "client.authentication.k8s.io/v1beta1",
        ),
        (ANSWER.replace("STATUS", "{}"), "exec plugin gave no token and no client certificate"),
        (
            ANSWER.replace("STATUS", "{'token': 't', 'expirationTimestamp': 'soon'}"),
            "exec: expirationTimestamp is not an RFC 3339 time",
        ),
    ],
)
def test_plugin_answers(tmp_path: Path, body: str, expected: ExecCredential | str) -> None:
    script = tmp_path / "plugin.py"
    script.write_text(body)
    entry = _exec_entry(script, provideClusterInfo=True, env=[{"name": "EXTRA", "value": "+extra"}])
    runner = PluginRunner(10.0)
    try:
        if isinstance(expected, ExecCredential):
            assert runner.run(entry, None, {"server": "https://example.test:6443"}) == expected
        else:
            with pytest.raises(ExecPluginError) as caught:
                runner.run(entry, None, {"server": "https://example.test:6443"})
            assert str(caught.value) == expected
    finally:
        runner.close()
    assert runner.live() == 0


def test_interactive_only_plugin_is_refused(tmp_path: Path) -> None:
    runner = PluginRunner(10.0)
    entry = _exec_entry(tmp_path / "never-run.py", interactiveMode="Always")
    with pytest.raises(ExecPluginError, match="needs a terminal"):
        runner.run(entry, None)
    assert runner.started == 0
    runner.close()


def _hung_users(folder: Path, script: Path, pids: Path, count: int, endpoint: str) -> None:
    doc = config_doc()
    for i in range(count):
        name = f"hung-{i}"
        doc["clusters"].append({"name": name, "cluster": {"server": endpoint}})
        entry = _exec_entry(script, str(pids / name), "marker", str(i))
        doc["users"].append({"name": name, "user": {"exec": entry}})
        doc["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    (folder / "hung.yaml").write_text(yaml.safe_dump(doc))


@pytest.mark.live
async def test_credential_work_never_starves_discovery_and_rendering(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory, tmp_path: Path
) -> None:
    """40 hung plugins, more than every executor has threads: each cycle still ends about
    one timeout after it starts, discovery still sees a new file, the default executor is
    free, and leaving the monitor kills every plugin."""
    ok = await fleet.add_cluster("ok")
    fleet.write_kubeconfig(kubeconfig_dir / "ok.yaml", ["ok"])
    script, pids = tmp_path / "sleeps.py", tmp_path / "pids"
    script.write_text(SLEEPS)
    pids.mkdir()
    _hung_users(kubeconfig_dir, script, pids, 40, ok.url)
    async with make_monitor(probe_timeout=0.5, concurrency=64) as (monitor, rec):
        for cycle in range(3):
            if cycle == 2:
                await fleet.add_cluster("late")
                fleet.write_kubeconfig(kubeconfig_dir / "late.yaml", ["late"])
            started = time.monotonic()
            async with asyncio.timeout(5.0):
                await monitor.run_cycle()
            print(f"cycle {cycle}: {time.monotonic() - started:.2f}s")
            assert rec.view("ok").success is True
            assert rec.view("hung-0").failures == ((Reason.CREDENTIALS, cycle + 1),)
            async with asyncio.timeout(1.0):  # the default executor has a free thread
                await asyncio.to_thread(int)
        assert rec.view("late").success is True
        recorded = [int(p) for f in pids.iterdir() for p in f.read_text().split()]
        assert recorded
    wait_until(lambda: not any(_alive(p) for p in recorded), 10.0, what="plugins killed")


@pytest.mark.live
async def test_contexts_sharing_a_hung_plugin_start_it_once_per_cycle(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory, tmp_path: Path
) -> None:
    ok = await fleet.add_cluster("ok")
    script, pids = tmp_path / "sleeps.py", tmp_path / "pids"
    script.write_text(SLEEPS)
    pids.mkdir()
    doc = config_doc()
    entry = _exec_entry(script, str(pids / "shared"), "marker")
    doc["users"].append({"name": "u", "user": {"exec": entry}})
    for i in range(20):
        doc["clusters"].append({"name": f"c{i}", "cluster": {"server": ok.url}})
        doc["contexts"].append({"name": f"c{i}", "context": {"cluster": f"c{i}", "user": "u"}})
    (kubeconfig_dir / "shared.yaml").write_text(yaml.safe_dump(doc))
    async with make_monitor(probe_timeout=0.5) as (monitor, rec):
        await monitor.run_cycle()
        assert monitor.client.credentials.plugins.started == 1
        assert {dict(rec.view(f"c{i}").failures).get(Reason.CREDENTIALS) for i in range(20)} == {1}


@pytest.mark.live
async def test_embedded_client_key_never_touches_the_disk(
    fleet: StandinFleet,
    kubeconfig_dir: Path,
    make_monitor: MonitorFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    await fleet.add_cluster("data")
    await fleet.add_cluster("exec")
    fleet.write_kubeconfig(kubeconfig_dir / "a.yaml", ["data"], credential="client_cert_data")
    fleet.write_kubeconfig(kubeconfig_dir / "b.yaml", ["exec"], credential="exec_cert", ca="data")
    before = dict(kube_config._temp_files)
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
    assert rec.view("data").success is True, monitor.states["data"].last
    assert rec.view("exec").success is True, monitor.states["exec"].last
    assert list(temp.iterdir()) == []
    assert kube_config._temp_files == before


def test_a_missing_plugin_is_named_as_such(tmp_path: Path) -> None:
    runner = PluginRunner(10.0)
    entry = {"apiVersion": "client.authentication.k8s.io/v1", "command": "./no-such-plugin"}
    with pytest.raises(ExecPluginError) as caught:
        runner.run(entry, str(tmp_path))
    assert str(caught.value) in (
        "exec: process returned 127 (command not found)",  # through the sh guard
        "exec: cannot start the plugin: no such file or directory",  # without /bin/sh
    )
    runner.close()
