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
- a probe (:func:`record_probe`): success resets ``consecutive_failures`` and
  ``credential_failures`` and stamps ``last_success``; a failure adds one to both
  ``consecutive_failures`` and the counter of its reason
  (``fleetwatch_cluster_probe_failures_total``), and to ``credential_failures`` when its
  reason is of the class ``credentials`` (``exporter.model.reason_class``). Every failure
  is logged; a success only when it ends a run of failures.
- checks (:meth:`ClusterTable.set_checks`): a cluster keeps, per check, what the
  exposition keeps of the check's last result (a :class:`Keeper`: its encoding,
  ``exporter.expose.encodings``; opaque here), never the result itself: at fleet scale
  the plain results would be most of the objects the exporter holds. A check that
  answers :class:`~exporter.model.Unchanged` shows that kept result again (or the part
  of it it names); one that fails or has nothing to publish shows nothing this cycle,
  its last result still kept for an ``Unchanged`` to come.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from exporter.model import (
    UNCHANGED,
    CheckResult,
    ProbeResult,
    Reason,
    ReasonClass,
    Unchanged,
    reason_class,
)
from fleetwatch.discovery.clusters import Cluster, Discovery

#: What the exposition keeps of one check result (its :class:`Keeper`'s): stored, never
#: looked into, by the table.
Kept = object


class Keeper(Protocol):
    """How check results are kept between cycles: the exposition's affair."""

    def keep(self, cluster: str, result: CheckResult) -> Kept | None:
        """What is kept of ``result`` of ``cluster``; None: nothing of it can be served."""
        ...

    def only(self, kept: Kept, families: frozenset[str]) -> Kept:
        """Of ``kept``, the samples of ``families`` only, and all its target groups."""
        ...


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
    #: per check (in the cycle's order): what this cycle shows of its result, kept
    #: (:class:`Keeper`); None: nothing
    checks: tuple[Kept | None, ...] = ()
    #: per check: its last result, kept, also while it shows nothing (for an
    #: ``Unchanged`` to come); usually the same tuple as ``checks``
    kept: tuple[Kept | None, ...] = ()
    #: of the ``consecutive_failures``, those whose reason is of the class ``credentials``
    #: (reset by a success): what ``fleetwatch rules --no-failure.count-rejected`` takes
    #: off the count toward OFFLINE
    credential_failures: int = 0

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
            state.cluster, state.probeable, result, 0, now, state.failures, state.checks, state.kept
        )  # credential_failures back to 0 with the rest of the run
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
        state.kept,
        state.credential_failures
        + (1 if reason_class(result.reason) is ReasonClass.CREDENTIALS else 0),
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
    #: clusters of the whole fleet in the last scan, before sharding (the shards compare it)
    fleet_size: int = 0

    def apply_discovery(self, discovery: Discovery, readable: Mapping[str, bool]) -> list[Note]:
        """Follow a discovery scan; ``readable``: kubeconfig_secret_ref -> is a readable file."""
        return [note for note in self.follow_discovery(discovery, readable) if note is not None]

    def follow_discovery(
        self, discovery: Discovery, readable: Mapping[str, bool]
    ) -> Iterator[Note | None]:
        """:meth:`apply_discovery` a cluster at a time: what to say about each (None:
        nothing), the table changed as far as it was read.

        Why: at 20,000 clusters following a scan that changed every cluster (the first
        one, a rotation of every Secret) took 0.41 s under cProfile, and was most of a
        125 ms turn of the probe loop at the first cycle's start; the cycle reads it a slice
        at a time (``exporter.net.turns.sliced``) so that no turn of its event loop holds
        it all. Each cluster is read from :attr:`states` when its turn comes: a probe
        recorded meanwhile is kept.
        """
        self.fleet_size = discovery.fleet_size
        for problem in discovery.new_problems:
            yield Note("warning", "kubeconfig problem, skipped: %s", (problem,))
        self.discovery_errors_total += len(discovery.new_problems)
        # Into an empty table (start-up) every cluster is new: the cycle's summary line
        # counts them, and a line per cluster would be thousands of lines at DEBUG only.
        found_level: Literal["debug", "info"] = "info" if self.states else "debug"
        names = {c.name for c in discovery.clusters}
        for gone in [n for n in self.states if n not in names]:
            if self.states.pop(gone, None) is None:
                continue
            self.warned_unprobeable.discard(gone)
            yield Note(
                "info", "cluster %s is no longer in any kubeconfig; its series are dropped", (gone,)
            )
        for cluster in discovery.clusters:
            note: Note | None = None
            state = self.states.get(cluster.name)
            if state is None:
                state = ClusterState(cluster)
                note = Note(
                    found_level,
                    "discovered cluster %s (%s) in %s",
                    (cluster.name, cluster.endpoint, cluster.kubeconfig_secret_ref),
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
                if note is not None:
                    yield note
                note = _not_probed(cluster)
            yield note

    def probeable(self) -> list[ClusterState]:
        return [s for s in self.states.values() if s.probeable]

    def record(self, name: str, result: ProbeResult, now: float) -> Note | None:
        """Record a probe of the cluster ``name``; what to log about it."""
        state, note = record_probe(self.states[name], result, now)
        self.states[name] = state
        return note

    def set_checks(
        self,
        name: str,
        outcomes: Sequence[CheckResult | Unchanged | None],
        keeper: Keeper,
    ) -> None:
        """What each check of ``name`` answered this cycle, in the checks' order (None:
        it failed or has nothing to publish)."""
        state = self.states.get(name)
        if state is None:
            return
        last = state.kept
        if last is state.checks and outcomes.count(UNCHANGED) == len(outcomes) == len(last):
            return  # the usual cycle: every check's whole result stands, and is shown
        shown: list[Kept | None] = []
        kept: list[Kept | None] = []
        for i, outcome in enumerate(outcomes):
            before = last[i] if i < len(last) else None
            if outcome is None:
                shown.append(None)
                kept.append(before)
            elif isinstance(outcome, Unchanged):
                only = outcome.only
                show = before if only is None or before is None else keeper.only(before, only)
                shown.append(show)
                kept.append(before)
            else:
                new = keeper.keep(name, outcome)
                shown.append(new)
                kept.append(new)
        if _same(shown, state.checks) and _same(kept, last):
            return
        checks = tuple(shown)
        # One tuple for both while every check shows its whole result (the usual case).
        self.states[name] = _with(
            state, checks=checks, kept=checks if _same(kept, checks) else tuple(kept)
        )


def _same(new: Sequence[Kept | None], old: tuple[Kept | None, ...]) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old, strict=True))


def _with(
    state: ClusterState,
    *,
    cluster: Cluster | None = None,
    probeable: bool | None = None,
    checks: tuple[Kept | None, ...] | None = None,
    kept: tuple[Kept | None, ...] | None = None,
) -> ClusterState:
    return ClusterState(
        cluster if cluster is not None else state.cluster,
        probeable if probeable is not None else state.probeable,
        state.last,
        state.consecutive_failures,
        state.last_success,
        state.failures,
        checks if checks is not None else state.checks,
        kept if kept is not None else state.kept,
        state.credential_failures,
    )


def _not_probed(cluster: Cluster) -> Note:
    """The warning for a cluster listed but never probed: its own reason where discovery
    gave one (an Argo CD Secret with ``awsAuthConfig``, an exec plugin while those are
    off), else its ref, which is then not a readable file."""
    if cluster.not_probeable:
        return Note(
            "warning",
            "cluster %s is not probed: %s (%s)",
            (cluster.name, cluster.not_probeable[:300], cluster.kubeconfig_secret_ref[:200]),
        )
    return Note(
        "warning",
        "cluster %s is not probed: kubeconfig_secret_ref %r is not a readable file",
        (cluster.name, cluster.kubeconfig_secret_ref[:200]),
    )
