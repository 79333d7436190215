"""Clusters that leave discovery leave nothing open behind them.

Sockets are counted as the kernel sees them: this process's descriptors
(``/proc/self/fd``) that are TCP connections to a stand-in cluster's port
(``/proc/net/tcp``), not what the pool believes it holds. The stand-in runs in the same
process, so only the client side (remote port = the cluster's port) is counted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from exporter.advice import OPEN_FILES_MARGIN, CycleWarnings
from exporter.controlplane.check import ControlPlaneCheck
from exporter.model import CycleSettings
from fleetwatch.standin import StandinFleet
from tests.helpers.exporter_helpers import MonitorFactory


def _our_socket_inodes() -> set[str]:
    inodes: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def client_sockets(port: int) -> int:
    """Established TCP connections of this process to ``port`` on 127.0.0.1."""
    ours = _our_socket_inodes()
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01" and fields[9] in ours:
                count += 1
    return count


@pytest.mark.live
async def test_a_removed_kubeconfig_has_no_open_connection_two_cycles_later(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    clusters = await fleet.add_clusters(6, "churn")
    files = fleet.write_kubeconfig_dir(kubeconfig_dir, clusters)
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
        before = {c.name: client_sockets(c.port) for c in clusters}
        assert before == {c.name: 1 for c in clusters}
        assert monitor.client.http.held == 6
        for path in files[:3]:  # three clusters leave the fleet
            path.unlink()
        await monitor.run_cycle()  # their connections go in this very cycle
        assert [client_sockets(c.port) for c in clusters[:3]] == [0, 0, 0]
        await monitor.run_cycle()
        assert [client_sockets(c.port) for c in clusters] == [0, 0, 0, 1, 1, 1]
        assert monitor.client.http.held == 3
        assert sorted(v.cluster.name for v in rec.last.clusters) == [c.name for c in clusters[3:]]


@pytest.mark.live
async def test_a_changed_server_never_keeps_the_old_connection(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    old, new = await fleet.add_clusters(2, "moved")
    path = kubeconfig_dir / "moved.yaml"
    fleet.write_kubeconfig(path, [old])
    async with make_monitor() as (monitor, rec):
        await monitor.run_cycle()
        assert client_sockets(old.port) == 1
        doc = yaml.safe_load(path.read_text())
        doc["clusters"][0]["cluster"]["server"] = new.url  # same context, another server
        path.write_text(yaml.safe_dump(doc))
        await monitor.run_cycle()
        assert rec.view(old.name).success is True
        assert (client_sockets(old.port), client_sockets(new.port)) == (0, 1)
        assert monitor.client.http.held == 1


@pytest.mark.live
async def test_a_removed_context_loses_its_credentials_and_a_rewrite_its_superseded_tunnel(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    """A context gone from a file that stays: its connection and its credentials go.

    The file is rewritten, so the cluster that stays gets new credentials (a new TLS
    context, so a new connection); the connection of its old credentials is closed one
    cycle later, when the new one has been used, instead of after an hour idle.
    """
    keep, drop = await fleet.add_clusters(2, "ctx")
    path = kubeconfig_dir / "two.yaml"
    fleet.write_kubeconfig(path, [keep, drop])
    async with make_monitor() as (monitor, _):
        await monitor.run_cycle()
        assert (client_sockets(keep.port), client_sockets(drop.port)) == (1, 1)
        builds = monitor.client.credentials.builds
        fleet.write_kubeconfig(path, [keep], ca="file")  # "drop" leaves; "keep" changes
        await monitor.run_cycle()
        assert client_sockets(drop.port) == 0
        assert monitor.client.credentials.builds == builds + 1  # "keep" resolved again
        await monitor.run_cycle()
        await monitor.run_cycle()
        assert (client_sockets(keep.port), client_sockets(drop.port)) == (1, 0)
        assert monitor.client.http.held == 1


def test_the_open_files_warning_counts_the_sockets_held() -> None:
    warnings = CycleWarnings(CycleSettings(interval=10, timeout=5, concurrency=8))
    limit = 300 + OPEN_FILES_MARGIN
    assert warnings.open_files(limit, probed=300, held=300) is None
    # 300 clusters probed, but 500 sockets still open: the need is what is held.
    note = warnings.open_files(limit, probed=300, held=500)
    assert note is not None
    assert note.args[:4] == (limit, 500 + OPEN_FILES_MARGIN, 300, 500)
    assert warnings.open_files(limit, probed=300, held=500) is None  # said once


def test_a_hard_open_files_limit_too_low_says_what_to_set_where() -> None:
    """The exporter raised its soft limit to the hard one: only whoever starts it can
    raise more, so the warning names each place and the number to set."""
    warnings = CycleWarnings(CycleSettings(interval=10, timeout=5, concurrency=8))
    note = warnings.open_files(20_000, probed=20_000, held=0, hard_limit=20_000)
    assert note is not None
    text = note.msg % note.args
    needed = 20_000 + OPEN_FILES_MARGIN
    assert f"open-files limit 20000 is below the {needed} this fleet needs" in text
    assert "hard limit 20000 cannot be raised by the exporter" in text
    assert f"LimitNOFILE={needed}" in text  # systemd
    assert f"--ulimit nofile={needed}:{needed}" in text  # docker, podman
    assert "containerd" in text and "CRI-O" in text  # Kubernetes: the runtime
    assert f"--probe.max-idle-connections {20_000 - OPEN_FILES_MARGIN}" in text
    # A hard limit that would do (the soft one could not be raised): the short advice.
    other = CycleWarnings(CycleSettings(interval=10, timeout=5, concurrency=8))
    short = other.open_files(20_000, probed=20_000, held=0, hard_limit=65_536)
    assert short is not None
    assert "hard limit" not in short.msg % short.args


@pytest.mark.live
async def test_the_control_plane_check_forgets_clusters_that_left(
    fleet: StandinFleet, kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    """Under churn a check must not keep what it read of every cluster it ever saw."""
    check = ControlPlaneCheck()
    clusters = await fleet.add_clusters(4, "cp")
    files = fleet.write_kubeconfig_dir(kubeconfig_dir, clusters)
    async with make_monitor(checks=[check]) as (monitor, _):
        await monitor.run_cycle()
        assert set(check._digest) == {c.name for c in clusters}
        for path in files[:2]:
            path.unlink()
        await monitor.run_cycle()
        kept = {c.name for c in clusters[2:]}
        for memory in (check._skip, check._view, check._digest, check._tls):
            assert set(memory) <= kept
        assert set(check._digest) == kept
