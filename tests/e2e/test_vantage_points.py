"""Two shards by two replicas of the exporter, one real Prometheus, the shipped rules.

The production shape runs every shard twice (two vantage points): a cluster is OFFLINE
only when both replicas that probe it fail it, and losing one replica changes nothing.
Here four real ``fleetwatch exporter`` processes (``--shard.count 2``, each replica with
a client certificate of its own) probe eight stand-in clusters every second; Prometheus
2.42 scrapes them and evaluates the rules of ``fleetwatch rules --failure.threshold 2
--probe.interval 1`` every second. A replica is cut off from one cluster by the
stand-in's blocked clients (its requests hang, as behind a network that drops packets).

"Changes no status" is read from Prometheus' own history: ``changes()`` and
``min_over_time()`` of ``cluster:fleetwatch_status:code`` over the whole window of the
step, so a flip lasting a single evaluation is seen too.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from alerts.rules import prom_duration
from fleetwatch.cli import wiring
from fleetwatch.common.contract import (
    CLUSTERS_COUNT_RECORD,
    FAILING_RATIO_RECORD,
    REPLICA_STATUS_RECORD,
    STATUS_CODE_RECORD,
    STATUS_CODES,
    STORM_ALERT,
    Status,
    StatusAlert,
)
from fleetwatch.discovery.shard import shard_of
from fleetwatch.procs import ManagedProcess, wait_until
from fleetwatch.standin import ThreadedFleet

pytestmark = pytest.mark.live

INTERVAL = 1.0
JOB = "fleetwatch-exporter"
SHARDS = 2
PER_SHARD = 4
ONLINE, OFFLINE, UNKNOWN = (
    STATUS_CODES[s] for s in (Status.ONLINE, Status.OFFLINE, Status.UNKNOWN)
)


def _names() -> dict[int, list[str]]:
    """Eight cluster names, four on each shard (the exporter's own hash decides)."""
    by_shard: dict[int, list[str]] = {i: [] for i in range(SHARDS)}
    i = 0
    while any(len(v) < PER_SHARD for v in by_shard.values()):
        i += 1
        name = f"vantage-{i:02d}"
        shard = by_shard[shard_of(name, SHARDS)]
        if len(shard) < PER_SHARD:
            shard.append(name)
    return by_shard


@dataclass
class Replica:
    shard: int
    name: str  #: also the common name of its client certificate
    kubeconfig: Path
    port: int | None = None
    proc: ManagedProcess | None = None

    @property
    def instance(self) -> str:
        return f"127.0.0.1:{self.port}"


class Rig:
    """Stand-in fleet, four exporters, one Prometheus; ``reset()`` before each step."""

    def __init__(self, root: Path, fleet: ThreadedFleet) -> None:
        self.root = root
        self.fleet = fleet
        self.by_shard = _names()
        self.clusters = sorted(n for names in self.by_shard.values() for n in names)
        self.replicas: list[Replica] = []
        self.prometheus: ManagedProcess | None = None
        self.prom_url = ""

    def start(self) -> Rig:
        for name in self.clusters:
            self.fleet.add_cluster(name)
        for shard in range(SHARDS):
            for side in "ab":
                name = f"exporter-{shard}{side}"
                client = self.fleet.issue_client(name)
                path = self.fleet.write_kubeconfig(
                    self.root / name / "kubeconfig.yaml", self.clusters, client=client
                )
                self.replicas.append(Replica(shard, name, path))
        # Each start waits for the exporter's /healthz: four at once, not one after another.
        with ThreadPoolExecutor(len(self.replicas)) as pool:
            list(pool.map(self.start_replica, self.replicas))
        rules = self.root / "fleetwatch.rules.yml"
        rendered = subprocess.run(
            wiring.fleetwatch_argv("rules", "--failure.threshold", "2", "--probe.interval", "1"),
            capture_output=True,
            check=True,
            timeout=60,
        )
        rules.write_bytes(rendered.stdout)
        every = prom_duration(INTERVAL)
        config = {
            "global": {"scrape_interval": every, "evaluation_interval": every},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "scrape_timeout": every,
                    "static_configs": [{"targets": [r.instance for r in self.replicas]}],
                }
            ],
        }
        self.prometheus, port = wiring.start_prometheus(self.root / "prometheus", config)
        self.prom_url = f"http://127.0.0.1:{port}"
        return self

    def start_replica(self, replica: Replica) -> None:
        replica.proc, replica.port = wiring.start_exporter(
            self.root / replica.name,
            port=replica.port,
            kubeconfig=replica.kubeconfig,
            interval=INTERVAL,
            extra=(f"--shard.count={SHARDS}", f"--shard.index={replica.shard}"),
        )

    def stop(self) -> None:
        for proc in [r.proc for r in self.replicas] + [self.prometheus]:
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.stop()

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def logs(self) -> str:
        procs = [r.proc for r in self.replicas] + [self.prometheus]
        return "\n".join(f"--- {p.log_path} ---\n{p.log_tail(15)}" for p in procs if p)

    # -- observing ----------------------------------------------------------------------

    def query(self, expr: str) -> list[dict[str, Any]]:
        return wiring.prometheus_query(self.prom_url, expr)

    def by_cluster(self, expr: str) -> dict[str, float]:
        """``expr``'s value per ``cluster`` label; a duplicate cluster fails the test."""
        values: dict[str, float] = {}
        for sample in self.query(expr):
            cluster = sample["metric"].get("cluster", "")
            assert cluster not in values, f"{expr}: two series for {cluster}"
            values[cluster] = float(sample["value"][1])
        return values

    def scalar(self, expr: str) -> float | None:
        result = self.query(expr)
        assert len(result) <= 1, f"{expr}: {len(result)} series"
        return float(result[0]["value"][1]) if result else None

    def statuses(self) -> dict[str, float]:
        return self.by_cluster(STATUS_CODE_RECORD)

    def firing(self, alertname: str, state: str = "firing") -> list[dict[str, str]]:
        result = self.query(f'ALERTS{{alertname="{alertname}", alertstate="{state}"}}')
        return [s["metric"] for s in result]

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
        try:
            return wait_until(predicate, timeout, interval=0.1, what=what)
        except TimeoutError as exc:
            view = f"statuses: {self.statuses()}\nALERTS: {self.query('ALERTS')}"
            raise AssertionError(f"{exc}\n{view}\n{self.logs()}") from None

    def last_evaluation(self) -> float:
        """Time of the newest evaluation of the status rule (Prometheus' clock)."""
        return self.scalar(f"max(timestamp({STATUS_CODE_RECORD}))") or 0.0

    def wait_evaluations(self, count: int) -> None:
        """Until the status rule has been evaluated ``count`` more times."""
        since = self.last_evaluation()
        self.wait(
            lambda: self.last_evaluation() >= since + count * INTERVAL - 0.01,
            f"{count} more evaluations",
        )

    def history(self, since: float, expr: str) -> dict[str, float]:
        """``expr`` with ``W`` replaced by the window from ``since`` (wall clock) to now.

        To the millisecond, and not one more: a wider window would reach the evaluation
        before the step, whose status the step did not make.
        """
        window = math.floor((time.time() - since) * 1000)
        return self.by_cluster(expr.replace("W", f"{window}ms"))

    def assert_no_status_changed(self, since: float, clusters: list[str], code: int) -> None:
        """Every one of ``clusters`` had ``code`` at every evaluation since ``since``."""
        lowest = self.history(since, f"min_over_time({STATUS_CODE_RECORD}[W])")
        highest = self.history(since, f"max_over_time({STATUS_CODE_RECORD}[W])")
        for name in clusters:
            assert (lowest.get(name), highest.get(name)) == (code, code), (
                f"{name}: status went from {lowest.get(name)} to {highest.get(name)} "
                f"since the step began, expected {code} throughout"
            )

    # -- steering -----------------------------------------------------------------------

    def reset(self) -> None:
        """Every replica up, every cluster answering everyone, all ONLINE."""
        for name in self.clusters:
            self.fleet.set_mode(name, "ok")
            self.fleet.set_blocked_clients(name, [])
        stopped = [r for r in self.replicas if r.proc is None or not r.proc.alive()]
        if stopped:
            with ThreadPoolExecutor(len(stopped)) as pool:
                list(pool.map(self.start_replica, stopped))
        expected = dict.fromkeys(self.clusters, float(ONLINE))
        self.wait(lambda: self.statuses() == expected, "every cluster ONLINE", timeout=30)
        self.wait(
            lambda: self.scalar(f'count(up{{job="{JOB}"}} == 1)') == 2 * SHARDS,
            "every replica scraped",
        )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, fleet: ThreadedFleet) -> Iterator[Rig]:
    running = Rig(tmp_path_factory.mktemp("vantage"), fleet)
    try:
        yield running.start()
    finally:
        running.stop()


def test_every_cluster_has_exactly_one_status(rig: Rig) -> None:
    rig.reset()
    # Each cluster is probed by exactly the two replicas of its shard, no one else.
    instances: dict[str, set[str]] = {}
    for sample in rig.query("fleetwatch_cluster_probe_consecutive_failures"):
        labels = sample["metric"]
        instances.setdefault(labels["cluster"], set()).add(labels["instance"])
    for shard, names in rig.by_shard.items():
        pair = {r.instance for r in rig.replicas if r.shard == shard}
        for name in names:
            assert instances[name] == pair, f"{name} (shard {shard})"
    # Four raw series per cluster become one status and one ONLINE alert each.
    rig.wait_evaluations(2)
    assert rig.statuses() == dict.fromkeys(rig.clusters, float(ONLINE))
    online = [a["cluster"] for a in rig.firing(StatusAlert.ONLINE.value)]
    assert sorted(online) == rig.clusters
    counts = {s["metric"]["status"]: float(s["value"][1]) for s in rig.query(CLUSTERS_COUNT_RECORD)}
    assert counts == {"ONLINE": 8.0, "OFFLINE": 0.0, "UNKNOWN": 0.0}
    assert rig.scalar(FAILING_RATIO_RECORD) == 0.0


def test_one_replica_down_changes_no_status_and_only_warns(rig: Rig) -> None:
    rig.reset()
    since = time.time()
    victim = rig.replica("exporter-0a")
    assert victim.proc is not None
    victim.proc.kill()
    rig.wait(
        lambda: rig.scalar(f'up{{instance="{victim.instance}"}}') == 0.0, "the replica seen down"
    )
    rig.wait_evaluations(3)
    # The replica-down warning is on its way (pending: `for: 2m`); the page is not.
    pending = rig.firing("FleetwatchExporterReplicaDown", "pending")
    assert [a["instance"] for a in pending] == [victim.instance]
    assert pending[0]["severity"] == "warning"
    assert rig.firing("FleetwatchExporterDown", "pending") == []
    # Back again: a fresh replica knows nothing for a cycle; that must change nothing either.
    rig.start_replica(victim)
    rig.wait(lambda: rig.scalar(f'up{{instance="{victim.instance}"}}') == 1.0, "the replica back")
    rig.wait_evaluations(3)
    rig.assert_no_status_changed(since, rig.clusters, ONLINE)
    assert rig.firing(StatusAlert.OFFLINE.value) == []


def test_cluster_cut_off_from_one_replica_stays_online(rig: Rig) -> None:
    rig.reset()
    since = time.time()
    target = rig.by_shard[0][0]
    rig.fleet.set_blocked_clients(target, ["exporter-0a"])
    a = rig.replica("exporter-0a")
    of_a = f'{{cluster="{target}", instance="{a.instance}"}}'
    rig.wait(
        lambda: (rig.scalar(f"fleetwatch_cluster_probe_consecutive_failures{of_a}") or 0) >= 3,
        "three failed probes from the cut-off replica",
    )
    rig.wait_evaluations(2)
    # That replica alone would call it OFFLINE; the other one's ONLINE wins.
    assert rig.scalar(f"{REPLICA_STATUS_RECORD}{of_a}") == OFFLINE
    rig.assert_no_status_changed(since, rig.clusters, ONLINE)
    assert target in {x["cluster"] for x in rig.firing(StatusAlert.ONLINE.value)}
    assert rig.firing(StatusAlert.OFFLINE.value) == []
    assert rig.firing("FleetClusterProbeFailing", "firing") == []
    assert rig.scalar(FAILING_RATIO_RECORD) == 0.0


def test_cluster_failing_for_both_replicas_is_offline(
    rig: Rig, record_timing: Callable[[str, float, float | None], None]
) -> None:
    rig.reset()
    target = rig.by_shard[0][1]
    started = time.monotonic()
    rig.fleet.set_blocked_clients(target, ["exporter-0a", "exporter-0b"])
    rig.wait(lambda: rig.statuses().get(target) == OFFLINE, f"{target} OFFLINE")
    record_timing("both replicas cut off -> OFFLINE (N=2, 1 s)", time.monotonic() - started, 2.0)
    rig.wait(
        lambda: target in {x["cluster"] for x in rig.firing(StatusAlert.OFFLINE.value)},
        "FleetClusterOffline firing",
    )
    others = [c for c in rig.clusters if c != target]
    assert {c: v for c, v in rig.statuses().items() if c != target} == dict.fromkeys(
        others, float(ONLINE)
    )
    # Restarting one replica while the cluster is OFFLINE: the newcomer has not probed it
    # yet (0 failures, never succeeded) and must not make it ONLINE for an evaluation.
    since = time.time()
    replica = rig.replica("exporter-0b")
    assert replica.proc is not None
    replica.proc.kill()
    rig.wait(lambda: rig.scalar(f'up{{instance="{replica.instance}"}}') == 0.0, "the replica down")
    rig.start_replica(replica)
    failures = f'fleetwatch_cluster_probe_consecutive_failures{{instance="{replica.instance}"}}'
    rig.wait(lambda: rig.by_cluster(failures).get(target, 0) >= 2, "the new replica failing it")
    rig.wait_evaluations(2)
    rig.assert_no_status_changed(since, [target], OFFLINE)
    rig.assert_no_status_changed(since, others, ONLINE)


def test_storm_guard_counts_each_cluster_once(rig: Rig) -> None:
    rig.reset()
    # Six of eight down for everyone, one more cut off from a single replica only.
    down = rig.by_shard[0][:3] + rig.by_shard[1][:3]
    half = rig.by_shard[0][3]
    for name in down:
        rig.fleet.set_mode(name, "down")
    rig.fleet.set_blocked_clients(half, ["exporter-0b"])
    rig.wait(lambda: rig.firing(STORM_ALERT) != [], "FleetProbeStorm firing")
    # Clusters, not series: 6 of 8 (counting series would give 13 of 16).
    assert rig.scalar(FAILING_RATIO_RECORD) == 6 / 8
    rig.wait(lambda: sum(1 for v in rig.statuses().values() if v == OFFLINE) == 6, "six OFFLINE")
    rig.wait_evaluations(2)
    counts = {s["metric"]["status"]: float(s["value"][1]) for s in rig.query(CLUSTERS_COUNT_RECORD)}
    assert counts == {"ONLINE": 2.0, "OFFLINE": 6.0, "UNKNOWN": 0.0}
    assert rig.statuses()[half] == ONLINE
    assert rig.scalar(FAILING_RATIO_RECORD) == 6 / 8
    offline = sorted(a["cluster"] for a in rig.firing(StatusAlert.OFFLINE.value))
    assert offline == sorted(down)


def test_shard_without_replicas_reads_unknown(rig: Rig) -> None:
    rig.reset()
    since = time.time()
    gone = [r for r in rig.replicas if r.shard == 1]
    for replica in gone:
        assert replica.proc is not None
        replica.proc.kill()
    rig.wait(lambda: rig.scalar(f'count(up{{job="{JOB}"}} == 0)') == 2.0, "both replicas seen down")
    unwatched, watched = rig.by_shard[1], rig.by_shard[0]
    rig.wait(lambda: all(rig.statuses().get(c) == UNKNOWN for c in unwatched), "shard 1 UNKNOWN")
    rig.wait_evaluations(2)
    # Never OFFLINE on the way, not failing, not in the storm guard's denominator.
    highest = rig.history(since, f"max_over_time({STATUS_CODE_RECORD}[W])")
    assert all(highest[c] in (UNKNOWN, ONLINE) for c in unwatched), highest
    rig.assert_no_status_changed(since, watched, ONLINE)
    assert rig.firing(StatusAlert.OFFLINE.value) == []
    assert rig.scalar(FAILING_RATIO_RECORD) == 0.0
    assert rig.scalar("count(max by (cluster) (fleetwatch_cluster_probeable) == 1)") == 4.0
    counts = {s["metric"]["status"]: float(s["value"][1]) for s in rig.query(CLUSTERS_COUNT_RECORD)}
    assert counts == {"ONLINE": 4.0, "OFFLINE": 0.0, "UNKNOWN": 4.0}
    # The shard is unwatched: that is the page, pending for both of its replicas.
    pending = rig.firing("FleetwatchExporterDown", "pending")
    assert sorted(a["instance"] for a in pending) == sorted(r.instance for r in gone)
    assert all(a["severity"] == "critical" for a in pending)
