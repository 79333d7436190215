"""The direct etcd client against a real 3-member cluster, walked through its failure states.

The tests of this module run in order on one shared cluster (starting one costs seconds):
3/3 -> leader killed -> 2/3 -> a second member killed -> lost -> a member back -> 2/3.
Each test first checks the state it starts from, so a failure points at the right step.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from alerts.rules import RuleSettings, render_rules
from exporter.configfile import EtcdConfig
from exporter.controlplane.etcd_client import probe_etcd
from exporter.controlplane.quorum import NO_LEADER_ERROR, EtcdReport, QuorumState
from tests.helpers.controlplane_promtool import observed_states_test
from tests.helpers.etcd_cluster import EtcdCluster
from tests.helpers.etcd_poll import poll

#: Every observed report, by step: test_etcd_rules_live feeds them to the alert rules.
OBSERVED: dict[str, EtcdReport] = {}


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def config_of(cluster: EtcdCluster) -> EtcdConfig:
    return EtcdConfig(endpoints=tuple(cluster.client_urls), timeout_seconds=3.0)


def leader_name(report: EtcdReport) -> str:
    return next(m.name for m in report.members if m.member_id == m.leader_id)


@pytest.mark.live
async def test_three_of_three_healthy_with_a_leader(
    etcd_cluster: EtcdCluster, session: aiohttp.ClientSession
) -> None:
    report = await probe_etcd(session, config_of(etcd_cluster))
    assert report.source == "direct"
    assert sorted(m.name for m in report.members) == ["m1", "m2", "m3"]
    assert all(m.healthy for m in report.members)
    assert report.has_leader is True
    q = report.quorum
    assert (q.members, q.healthy, q.size, q.state) == (3, 3, 2, QuorumState.HEALTHY)
    assert all(m.db_size_bytes and m.db_size_bytes > 0 for m in report.members)
    assert report.raft_term is not None and report.raft_term >= 2
    assert len({m.leader_id for m in report.members}) == 1
    OBSERVED["healthy"] = report


@pytest.mark.live
async def test_leader_killed_two_of_three_after_reelection(
    etcd_cluster: EtcdCluster, session: aiohttp.ClientSession
) -> None:
    before = await probe_etcd(session, config_of(etcd_cluster))
    assert before.quorum.state is QuorumState.HEALTHY
    old_leader = leader_name(before)
    etcd_cluster.member(old_leader).kill()

    def reelected(r: EtcdReport) -> bool:
        return (
            r.quorum.healthy == 2
            and r.has_leader is True
            and r.raft_term is not None
            and r.raft_term > (before.raft_term or 0)
        )

    report = await poll(
        lambda: probe_etcd(session, config_of(etcd_cluster)), reelected, 10, "re-election"
    )
    q = report.quorum
    assert (q.members, q.healthy, q.size) == (3, 2, 2)
    assert q.state is QuorumState.NO_FAULT_TOLERANCE
    assert q.fault_tolerance == 0
    dead = next(m for m in report.members if m.name == old_leader)
    assert dead.healthy is False
    assert leader_name(report) != old_leader
    OBSERVED["no_fault_tolerance"] = report


@pytest.mark.live
async def test_two_killed_quorum_lost_and_no_leader(
    etcd_cluster: EtcdCluster, session: aiohttp.ClientSession
) -> None:
    before = await probe_etcd(session, config_of(etcd_cluster))
    assert before.quorum.state is QuorumState.NO_FAULT_TOLERANCE
    victim = next(m.name for m in before.members if m.healthy)
    etcd_cluster.member(victim).kill()

    report = await poll(
        lambda: probe_etcd(session, config_of(etcd_cluster)),
        lambda r: r.has_leader is False,
        20,
        "no leader",
    )
    q = report.quorum
    assert (q.members, q.healthy, q.state) == (3, 0, QuorumState.LOST)
    survivor = next(m for m in report.members if m.raft_term is not None)
    assert NO_LEADER_ERROR in survivor.errors
    assert survivor.leader_id is None
    OBSERVED["lost"] = report

    # Waiting out a possible election stays inside the budget: the exporter's per-cluster
    # check must end before --probe.timeout (a bound, not a speed measurement).
    config = config_of(etcd_cluster)
    started = time.monotonic()
    await probe_etcd(session, config)
    assert time.monotonic() - started < config.timeout_seconds + 2.0


@pytest.mark.live
async def test_member_restarted_back_to_two_of_three(
    etcd_cluster: EtcdCluster, session: aiohttp.ClientSession
) -> None:
    down = [m for m in etcd_cluster.members if not m.alive()]
    assert len(down) == 2
    down[0].start()
    report = await poll(
        lambda: probe_etcd(session, config_of(etcd_cluster)),
        lambda r: r.quorum.healthy == 2 and r.has_leader is True,
        15,
        "quorum back",
    )
    assert report.quorum.state is QuorumState.NO_FAULT_TOLERANCE
    assert next(m for m in report.members if m.name == down[0].name).healthy
    OBSERVED["restored"] = report


@pytest.mark.live
async def test_members_found_through_member_list(
    etcd_cluster: EtcdCluster, session: aiohttp.ClientSession
) -> None:
    """One configured endpoint is enough: the others come from the member list."""
    alive = next(m for m in etcd_cluster.members if m.alive())
    report = await probe_etcd(session, EtcdConfig(endpoints=(alive.client_url,)))
    assert len(report.members) == 3
    assert report.quorum.healthy == 2


async def test_nothing_answers(session: aiohttp.ClientSession) -> None:
    from fleetwatch.procs import free_port

    url = f"http://127.0.0.1:{free_port()}"
    report = await probe_etcd(session, EtcdConfig(endpoints=(url,), timeout_seconds=1.5))
    assert report.has_leader is False
    assert report.quorum.state is QuorumState.LOST
    assert [m.name for m in report.members] == [url.removeprefix("http://")]


@pytest.mark.live
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_alert_rules_on_the_observed_states(tmp_path: Path) -> None:
    """The alerts' expressions against what this real cluster reported at each step above."""
    assert set(OBSERVED) == {"healthy", "no_fault_tolerance", "lost", "restored"}
    (tmp_path / "rules.yml").write_text(render_rules(RuleSettings()))
    (tmp_path / "observed.test.yml").write_text(observed_states_test(OBSERVED, "rules.yml"))
    result = subprocess.run(
        ["promtool", "test", "rules", "observed.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
