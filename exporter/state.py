"""What the exporter remembers about each cluster between cycles, and the rules that change it.

Pure: frozen :class:`ClusterState` values, changed only by the functions below, which
return the new state and what to say about the change as data (:class:`Note`, logged by
the cycle). :class:`ClusterTable` holds the states by cluster name.

The rules:

- discovery (:meth:`ClusterTable.apply_discovery`): a cluster new in the kubeconfigs gets
  a fresh state; one no longer there is dropped with its series; a changed endpoint or
  file keeps the cluster's history (same name, same cluster). A cluster whose
  ``kubeconfig_secret_ref`` is not a readable file is *not probeable*: never probed, never
  failing, said once until it becomes probeable again.
- a probe (:func:`record_probe`): success resets ``consecutive_failures`` and stamps
  ``last_success``; a failure adds one to both ``consecutive_failures`` and the counter of
  its reason (``fleetwatch_cluster_probe_failures_total``). Every failure is logged; a
  success only when it ends a run of failures.
- checks (:meth:`ClusterTable.set_checks`): a cluster keeps its checks' last results as
  they were handed; the same results handed again keep the state as it is, so the
  exposition, which encodes results once (``exporter.expose.encodings``), sees them
  unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from discovery.clusters import Cluster, Discovery
from exporter.model import CheckResult, ProbeResult, Reason


@dataclass(frozen=True)
class Note:
    """A log line as data: ``log.<level>(msg, *args)``, said by the caller."""

    level: Literal["debug", "info", "warning"]
    msg: str
    args: tuple[object, ...] = ()


@dataclass(frozen=True)
class ClusterState:
    """What the exporter remembers about one cluster between cycles."""

    cluster: Cluster
    probeable: bool = False
    last: ProbeResult | None = None
    consecutive_failures: int = 0
    last_success: float = 0.0  #: epoch seconds, 0 if never
    failures: tuple[tuple[Reason, int], ...] = ()  #: failed probes by reason, sorted
    checks: tuple[CheckResult, ...] = ()  #: the last cycle's results of the checks

    # What the exposition reads of a state (``exporter.expose.snapshot.ClusterView``).
    @property
    def success(self) -> bool | None:
        """Did the last probe succeed; None before the first."""
        return None if self.last is None else self.last.success

    @property
    def duration(self) -> float:
        """Seconds the last probe took; 0 before the first."""
        return 0.0 if self.last is None else self.last.duration


def record_probe(
    state: ClusterState, result: ProbeResult, now: float
) -> tuple[ClusterState, Note | None]:
    """``state`` after the probe ``result`` at ``now`` (epoch seconds), and what to log."""
    name = state.cluster.name
    if result.success:
        note = None
        if state.consecutive_failures > 0:
            note = Note(
                "info",
                "cluster %s: probe succeeded again after %d failures",
                (name, state.consecutive_failures),
            )
        new = ClusterState(
            state.cluster, state.probeable, result, 0, now, state.failures, state.checks
        )
        return new, note
    assert result.reason is not None
    failures = dict(state.failures)
    failures[result.reason] = failures.get(result.reason, 0) + 1
    consecutive = state.consecutive_failures + 1
    new = ClusterState(
        state.cluster,
        state.probeable,
        result,
        consecutive,
        state.last_success,
        tuple(sorted(failures.items())),
        state.checks,
    )
    # A change of state (it starts failing, or fails for another reason) is said at INFO;
    # the same failure again at DEBUG: one summary line per cycle says how many fail.
    previous = state.last.reason if state.last is not None else None
    note = Note(
        "info" if consecutive == 1 or previous is not result.reason else "debug",
        "cluster %s: probe failed (%s): %s [%d in a row]",
        (name, result.reason.value, result.detail, consecutive),
    )
    return new, note


@dataclass
class ClusterTable:
    """The clusters by name, and the one-time warnings already given."""

    states: dict[str, ClusterState] = field(default_factory=dict)
    #: clusters already warned about as not probeable (said once, until they change)
    warned_unprobeable: set[str] = field(default_factory=set)
    discovery_errors_total: int = 0

    def apply_discovery(self, discovery: Discovery, readable: Mapping[str, bool]) -> list[Note]:
        """Follow a discovery scan; ``readable``: kubeconfig_secret_ref -> is a readable file."""
        notes = [
            Note("warning", "kubeconfig problem, skipped: %s", (p,)) for p in discovery.new_problems
        ]
        self.discovery_errors_total += len(discovery.new_problems)
        # Into an empty table (start-up) every cluster is new: the cycle's summary line
        # counts them, and a line per cluster would be thousands of lines at DEBUG only.
        found_level: Literal["debug", "info"] = "info" if self.states else "debug"
        names = {c.name for c in discovery.clusters}
        for gone in [n for n in self.states if n not in names]:
            del self.states[gone]
            self.warned_unprobeable.discard(gone)
            notes.append(
                Note(
                    "info",
                    "cluster %s is no longer in any kubeconfig; its series are dropped",
                    (gone,),
                )
            )
        for cluster in discovery.clusters:
            state = self.states.get(cluster.name)
            if state is None:
                state = ClusterState(cluster)
                notes.append(
                    Note(
                        found_level,
                        "discovered cluster %s (%s) in %s",
                        (cluster.name, cluster.endpoint, cluster.kubeconfig_secret_ref),
                    )
                )
            probeable = readable.get(cluster.kubeconfig_secret_ref, False)
            if state.cluster != cluster or state.probeable != probeable:
                # endpoint or file changed: same cluster, new address
                state = _with(state, cluster=cluster, probeable=probeable)
            self.states[cluster.name] = state
            if probeable:
                self.warned_unprobeable.discard(cluster.name)
            elif cluster.name not in self.warned_unprobeable:
                self.warned_unprobeable.add(cluster.name)
                notes.append(
                    Note(
                        "warning",
                        "cluster %s is not probed: kubeconfig_secret_ref %r is not a readable file",
                        (cluster.name, cluster.kubeconfig_secret_ref[:200]),
                    )
                )
        return notes

    def probeable(self) -> list[ClusterState]:
        return [s for s in self.states.values() if s.probeable]

    def record(self, name: str, result: ProbeResult, now: float) -> Note | None:
        """Record a probe of the cluster ``name``; what to log about it."""
        state, note = record_probe(self.states[name], result, now)
        self.states[name] = state
        return note

    def set_checks(self, name: str, results: Iterable[CheckResult]) -> None:
        """The results of the checks of ``name`` this cycle."""
        state = self.states.get(name)
        if state is None:
            return
        checks = tuple(results)
        kept = state.checks
        if len(checks) == len(kept) and all(a is b for a, b in zip(checks, kept, strict=True)):
            return  # the usual cycle hands the same results again
        self.states[name] = _with(state, checks=checks)


def _with(
    state: ClusterState,
    *,
    cluster: Cluster | None = None,
    probeable: bool | None = None,
    checks: tuple[CheckResult, ...] | None = None,
) -> ClusterState:
    return ClusterState(
        cluster if cluster is not None else state.cluster,
        probeable if probeable is not None else state.probeable,
        state.last,
        state.consecutive_failures,
        state.last_success,
        state.failures,
        checks if checks is not None else state.checks,
    )
