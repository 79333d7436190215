"""One moment of the exporter, frozen for ``/metrics`` and ``/sd/control-plane``.

After each phase of a cycle the runner builds a :class:`Snapshot` (pure: the cluster table
and the cycle's counters in, immutable values out) and hands it to the exposition, which
renders it in another thread. Scrapes serve the last rendering and never wait for a probe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from exporter.model import CycleSettings, MetricFamily
from exporter.state import ClusterState, ClusterTable

#: One cluster as the exposition shows it: its state as the cluster table holds it. A
#: state is immutable (a probe or a check replaces it), so a snapshot shares the table's
#: states instead of copying them: a publication is on the critical path of a cycle with
#: hung clusters, and copying every state would be most of it.
ClusterView = ClusterState


@dataclass(frozen=True)
class Snapshot:
    """Everything ``/metrics`` and ``/sd/control-plane`` show, as of one moment."""

    clusters: tuple[ClusterView, ...]
    check_families: tuple[MetricFamily, ...]
    check_errors: tuple[tuple[str, int], ...]
    discovery_errors_total: int
    cycles_total: int
    cycle_duration: float  #: seconds, last complete cycle (0 before the first)
    last_cycle_end: float  #: epoch seconds, 0 before the first
    interval: float
    timeout: float
    #: (index, count) of this exporter's shard; (0, 1) when it probes the whole fleet
    shard: tuple[int, int] = (0, 1)
    #: clusters in the whole fleet as the last scan saw it, before sharding
    fleet_size: int = 0
    #: whether ``fleetwatch_cluster_labels`` is published (``--metric-labels-allowlist``
    #: not empty): then one series per cluster, its labels or none
    cluster_labels: bool = False


@dataclass
class CycleStats:
    """The runner's own counters, as ``fleetwatch_exporter_*`` shows them."""

    cycles_total: int = 0
    cycle_duration: float = 0.0  #: seconds, last complete cycle
    last_cycle_end: float = 0.0  #: epoch seconds
    probes_started: int = 0  #: total probes sent (tests check "never probed")
    #: clusters whose probe timed out in the last cycle, and probes that waited for a slot
    last_timed_out: tuple[str, ...] = ()
    last_slot_waits: int = 0
    check_errors: dict[str, int] = field(default_factory=dict)  #: by check name


def declared_families(declared: Iterable[Iterable[MetricFamily]]) -> tuple[MetricFamily, ...]:
    """Every check's families, the first declaration of a name winning."""
    families: dict[str, MetricFamily] = {}
    for group in declared:
        for fam in group:
            families.setdefault(fam.name, fam)
    return tuple(families.values())


def build_snapshot(
    table: ClusterTable,
    families: tuple[MetricFamily, ...],
    stats: CycleStats,
    settings: CycleSettings,
) -> Snapshot:
    views = tuple(table.states.values())
    return Snapshot(
        clusters=views,
        check_families=families,
        check_errors=tuple(sorted(stats.check_errors.items())),
        discovery_errors_total=table.discovery_errors_total,
        cycles_total=stats.cycles_total,
        cycle_duration=stats.cycle_duration,
        last_cycle_end=stats.last_cycle_end,
        interval=settings.interval,
        timeout=settings.timeout,
        fleet_size=table.fleet_size,
    )
