"""A kubeconfig rewritten in place never makes the exporter publish fewer clusters.

The cycle's side of ``fleetwatch.discovery.settle``: a scan that finds a file changing asks to look
again (``Discovery.rescan_in``), and the cycle does, once, when that comes before the next
cycle (always in the first); ``/-/ready`` counts cycles, not scans. Then the issue's own
measurement, on a real ``fleetwatch exporter``: 200 clusters in one file rewritten about
six times a second by truncate and chunked writes, 40 scrapes (counted, not timed: a
loaded machine takes longer, the verdict is the same).
"""

from __future__ import annotations

import re
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from exporter.secretsource import SecretSource
from fleetwatch.discovery import Cluster, ContextConfig, Discoverer, Discovery
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.discovery.clusters import probeable
from fleetwatch.procs import ManagedProcess, free_port, wait_until

if TYPE_CHECKING:
    from tests.helpers.exporter_helpers import MonitorFactory

#: the installed console script, next to the interpreter running the tests
_SCRIPT = Path(sys.executable).parent / "fleetwatch"
FLEETWATCH = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "fleetwatch.cli"]


def cluster(name: str) -> Cluster:
    """A cluster whose kubeconfig is no readable file: listed, never probed."""
    return Cluster(name, f"https://127.0.0.1:1/{name}", "/nonexistent/kubeconfig", name)


class Scans:
    """A discovery source that answers the given scans in turn (the last one again)."""

    def __init__(self, *answers: Discovery) -> None:
        self.answers = answers
        self.scans = 0

    def scan(self) -> Discovery:
        self.scans += 1
        return self.answers[min(self.scans, len(self.answers)) - 1]

    def context_config(self, cluster: Cluster) -> ContextConfig | None:
        return None

    def probeable(self, ref: str) -> bool:
        return probeable(ref)  # files are looked at


CHANGING = Discovery((cluster("a"),), (), fleet_size=1, rescan_in=0.05)
SETTLED = Discovery((cluster("a"), cluster("b")), (), fleet_size=2)


async def test_a_cycle_that_finds_a_file_changing_reads_it_once_settled(
    make_monitor: MonitorFactory,
) -> None:
    source = Scans(CHANGING, SETTLED)
    async with make_monitor(discovery=source, interval=300.0) as (monitor, rec):
        await monitor.run_cycle()
    assert source.scans == 2
    assert [v.cluster.name for v in rec.last.clusters] == ["a", "b"]


async def test_a_change_that_settles_after_the_next_cycle_is_left_to_it(
    make_monitor: MonitorFactory,
) -> None:
    """An interval shorter than the wait: the next cycle reads the file, this one does
    not outlast the interval for it."""
    source = Scans(Discovery((cluster("a"),), (), fleet_size=1), CHANGING, SETTLED)
    async with make_monitor(discovery=source, interval=0.04, probe_timeout=0.04) as (
        monitor,
        rec,
    ):
        await monitor.run_cycle()
        await monitor.run_cycle()
        assert source.scans == 2 and [v.cluster.name for v in rec.last.clusters] == ["a"]
        await monitor.run_cycle()
    assert source.scans == 3 and [v.cluster.name for v in rec.last.clusters] == ["a", "b"]


async def test_the_first_cycle_always_waits_for_a_file_changing(
    make_monitor: MonitorFactory,
) -> None:
    """Its publication makes the exporter ready: a file written just before start is in it."""
    source = Scans(CHANGING, SETTLED)
    async with make_monitor(discovery=source, interval=0.04, probe_timeout=0.04) as (
        monitor,
        rec,
    ):
        await monitor.run_cycle()
    assert source.scans == 2
    assert [v.cluster.name for v in rec.last.clusters] == ["a", "b"]


class Informer:
    """What SecretSource reads of the informer: whether it has listed, and its objects."""

    synced = False

    def objects(self) -> dict[str, Any]:
        return {}


def test_readiness_counts_cycles_not_scans() -> None:
    """The management cluster's list arrives between the two scans of the first cycle:
    that cycle is the first complete one (counting scans would say the second)."""
    informer = Informer()
    done = 0
    source = SecretSource(
        Discoverer(None, None),
        informer,  # type: ignore[arg-type]
        KubernetesDiscovery(),
        cycles_done=lambda: done,
    )
    source.scan()
    assert source.first_complete_cycle is None
    informer.synced = True
    source.scan()
    assert source.first_complete_cycle == 1
    done = 1
    source.scan()
    assert source.first_complete_cycle == 1


# --- the measurement -------------------------------------------------------------

FLEET = 200
#: the writer's pace: a rewrite about four to six times a second, each in 512-byte pieces
#: about a millisecond apart (some 70 ms for the 32 KB file), so that a read often lands in
#: the middle: before this fix, 3 to 8 of 49 scrapes showed fewer clusters (down to none),
#: and half-written versions were counted as discovery errors (the workload, not a wait)
REWRITES_PER_S = 6
PIECE = 512
#: scrapes taken and rewrites made before the verdict (about ten seconds on a quiet machine)
SCRAPES = 40
REWRITES = 20


def fleet_kubeconfig(count: int) -> bytes:
    """``count`` clusters, keys in kubectl's (alphabetical) order: a prefix of it holds
    contexts whose users are missing."""
    names = [f"c{i:03d}" for i in range(count)]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": f"https://127.0.0.1:1/{n}"}} for n in names],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
        "users": [{"name": n, "user": {"token": f"token-{n}"}} for n in names],
    }
    return yaml.dump(doc, Dumper=yaml.CSafeDumper).encode()


def write_in_place(path: Path, data: bytes) -> None:
    """What ``os.WriteFile`` does, in pieces: truncate, then write."""
    with open(path, "r+b", buffering=0) as f:
        f.truncate(0)
        for start in range(0, len(data), PIECE):
            f.write(data[start : start + PIECE])
            time.sleep(0.001)


def published(port: int) -> tuple[int, float]:
    """The clusters one scrape shows, and the discovery errors counted so far."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    clusters = text.count("\nfleetwatch_cluster_info{")
    errors = re.search(r"^fleetwatch_exporter_discovery_errors_total (\S+)$", text, re.M)
    return clusters, float(errors.group(1)) if errors else -1.0


@pytest.mark.live
def test_a_kubeconfig_rewritten_in_place_never_publishes_fewer_clusters(tmp_path: Path) -> None:
    path = tmp_path / "config"
    data = fleet_kubeconfig(FLEET)
    path.write_bytes(data)
    port = free_port()
    proc = ManagedProcess(
        [
            *FLEETWATCH,
            "exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            "--kubeconfig",
            str(path),
            "--probe.interval=0.5",
            "--probe.timeout=0.4",
        ],
        tmp_path / "exporter.log",
        ready_url=f"http://127.0.0.1:{port}/-/ready",
        env={"KUBECONFIG_DIR": ""},
    )
    stop = threading.Event()
    rewrites = 0

    def rewrite_forever() -> None:
        nonlocal rewrites
        while not stop.is_set():
            write_in_place(path, data)
            rewrites += 1
            stop.wait(1 / REWRITES_PER_S)

    with proc:
        assert published(port) == (FLEET, 0)  # the first cycle has the whole file
        writer = threading.Thread(target=rewrite_forever, name="kubeconfig writer")
        writer.start()
        scrapes: list[tuple[int, float]] = []
        try:
            # Counted, not timed: SCRAPES scrapes while at least REWRITES rewrites happen,
            # however slowly a loaded machine gets there (the deadline only stops a hang).
            deadline = time.monotonic() + 180
            while len(scrapes) < SCRAPES or rewrites < REWRITES:
                assert time.monotonic() < deadline, f"{len(scrapes)} scrapes, {rewrites} rewrites"
                scrapes.append(published(port))
                time.sleep(0.2)  # Prometheus' pace, faster: the measurement, not a wait
        finally:
            stop.set()
            writer.join()
        fewer = [n for n, _ in scrapes if n != FLEET]
        assert fewer == [], f"{len(fewer)} of {len(scrapes)} scrapes: {sorted(fewer)[:10]}"
        assert {errors for _, errors in scrapes} == {0}  # nothing half-written was even read
        # Once the file holds still, its new version is published.
        write_in_place(path, fleet_kubeconfig(FLEET + 1))
        wait_until(lambda: published(port)[0] == FLEET + 1, 10, what="the new version")
        assert proc.stop() == 0, proc.log_tail()
