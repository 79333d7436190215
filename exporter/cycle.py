"""The probe cycle: re-scan, probe every probeable cluster concurrently, check, publish.

Every ``interval`` seconds: discovery re-scans (cheap when nothing changed; once more a
moment later when it found a file changing, ``fleetwatch.discovery.settle``), every
probeable cluster is probed under a semaphore of ``concurrency``, each probe (credentials
included) bounded by ``timeout``, then the per-cluster checks of the extension seam run.
A probe holds its slot while it works and gives it back while it waits
(``exporter.net.Slot``), so hung API servers never hold up the others while the CPU-heavy
part stays bounded. Each phase ends with :meth:`Monitor.publish` handing an immutable
snapshot to the exposition. Clusters whose last probe timed out are probed first, before
the scan, and without a slot, so the timeouts of hung API servers start with the cycle
and the cycle ends about one timeout after it starts; their connections are opened again
once the cycle is over, before the next one starts.

:class:`Monitor` runs cycles and nothing else. What it remembers per cluster is
``exporter.state`` (pure rules), what it warns about is ``exporter.advice``, the network
(connections, credentials, proxies) is ``exporter.net.FleetClient``, the snapshot
``exporter.expose.snapshot``.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from exporter.advice import CycleWarnings
from exporter.checks import ClosingCheck, ClusterCheck, RetainingCheck
from exporter.expose.encodings import Encoder
from exporter.expose.snapshot import CycleStats, Snapshot, build_snapshot, declared_families
from exporter.model import CheckResult, CycleSettings, ProbeResult, Reason, Unchanged
from exporter.net import ApiClient, FleetClient, Probed, Slot, next_turn, sliced
from exporter.state import ClusterState, ClusterTable, Note
from fleetwatch.common.waits import wait_event
from fleetwatch.discovery.clusters import Cluster, ContextConfig, Discovery

log = logging.getLogger(__name__)

#: Added to a re-scan's wait for a file to settle. File times are wall-clock times and the
#: wait is on the loop's monotonic clock: landing a hair before the file is settled would
#: leave it for the next cycle (an interval away; in the first cycle, the exporter ready
#: without it). Seen: a file 0.37 s old at the first scan, re-scanned 0.63 s later, still
#: "0.0001 s to go".
RESCAN_MARGIN_S = 0.05
#: Probe tasks started in one turn of the event loop (:meth:`Monitor._start_probes`).
START_SLICE = 100


class DiscoverySource(Protocol):
    """What the cycle needs from discovery (``fleetwatch.discovery.scan.Discoverer``)."""

    def scan(self) -> Discovery: ...

    def context_config(self, cluster: Cluster) -> ContextConfig | None: ...

    def probeable(self, ref: str) -> bool:
        """Whether a ``kubeconfig_secret_ref`` can be probed: files are looked at, a source
        of Secrets read through an API says which of its refs it holds."""
        ...


Publisher = Callable[[Snapshot], Awaitable[None]]


@dataclass
class _Round:
    """One cycle's working set: its slots, what waited for one, what timed out."""

    semaphore: asyncio.Semaphore
    slot_waits: int = 0
    timed_out: list[tuple[str, ApiClient]] = field(default_factory=list)


def _current(state: ClusterState | None, cluster: Cluster) -> bool:
    """Is ``cluster``, as a probe started with it, still probed as is (``state``: now)?"""
    return state is not None and state.probeable and state.cluster == cluster


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


def _say(note: Note | None) -> None:
    if note is not None:
        log.log(_LEVELS[note.level], note.msg, *note.args)


async def _same_scan(
    seen: tuple[tuple[Cluster, ...], dict[str, bool]],
    last: tuple[tuple[Cluster, ...], dict[str, bool]] | None,
) -> bool:
    """Whether a scan found what the last one did, the clusters compared a slice a turn
    (20,000 of them are tens of milliseconds)."""
    if last is None or len(seen[0]) != len(last[0]) or seen[1] != last[1]:
        return False
    async for now, before in sliced(zip(seen[0], last[0], strict=True)):
        if now is not before and now != before:
            return False
    return True


class Monitor:
    """Runs probe cycles over discovery, the cluster table and the fleet's client."""

    def __init__(
        self,
        settings: CycleSettings,
        discovery: DiscoverySource,
        publish: Publisher,
        checks: Sequence[ClusterCheck] = (),
        environ: Mapping[str, str] | None = None,
        after_cycle: Callable[[], None] | None = None,
    ) -> None:
        """``environ``: where ``HTTPS_PROXY``/``NO_PROXY`` are read, once (default: ours).

        ``after_cycle``: called by :meth:`run_forever` when a cycle has ended and been
        published (the process's collector policy, ``fleetwatch.common.gcpolicy``).
        """
        self.settings = settings
        self._after_cycle = after_cycle
        self.discovery = discovery
        self._publish = publish
        self.checks = tuple(checks)
        self._families = declared_families(c.families for c in self.checks)
        #: what the table keeps of the checks' results: their encoding, made once per result
        self._keeper = Encoder(self._families)
        self.table = ClusterTable()
        self.client = FleetClient(
            settings.timeout, settings.interval, settings.max_idle_connections, environ
        )
        self.warnings = CycleWarnings(settings)
        self.stats = CycleStats(check_errors={c.name: 0 for c in self.checks})
        #: set by :meth:`wake`: the next cycle starts now, not at the interval
        self._wake = asyncio.Event()
        self._probes_started_at: float | None = None  #: loop time of the last cycle's probes
        #: the last scan's clusters and readable refs: unchanged, nothing new to publish
        self._last_seen: tuple[tuple[Cluster, ...], dict[str, bool]] | None = None

    async def __aenter__(self) -> Monitor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        for check in self.checks:
            if isinstance(check, ClosingCheck):
                await check.aclose()

    # What tests and benchmarks read.
    @property
    def states(self) -> dict[str, ClusterState]:
        return self.table.states

    @property
    def discovery_errors_total(self) -> int:
        return self.table.discovery_errors_total

    @property
    def probes_started(self) -> int:
        return self.stats.probes_started

    @property
    def cycle_duration(self) -> float:
        return self.stats.cycle_duration

    @property
    def last_timed_out(self) -> tuple[str, ...]:
        return self.stats.last_timed_out

    @property
    def last_slot_waits(self) -> int:
        return self.stats.last_slot_waits

    # -- the loop ---------------------------------------------------------------------

    async def run_forever(self) -> None:
        """Run cycles every ``interval`` seconds until cancelled."""
        while True:
            started = time.monotonic()
            try:
                await self.run_cycle()
            except Exception:  # a bug in one cycle must not stop the next ones
                log.exception("probe cycle failed; the next one starts on schedule")
            if self._after_cycle is not None:
                self._after_cycle()
            elapsed = time.monotonic() - started
            self.report_cycle_length(elapsed)
            await self.until_next_cycle(elapsed)

    async def until_next_cycle(self, elapsed: float) -> None:
        """Wait for the next cycle's start: ``interval`` after the last one started.

        And not before the reconnections the last cycle started have ended, for at most a
        timeout: a cycle that outlasted the interval (the first one, at fleet scale) would
        otherwise carry its timed-out clusters' handshakes into the next cycle, whose hung
        clusters then end it late. Scheduling, not synchronisation.
        """
        await wait_event(self._wake, self.settings.interval - elapsed)
        self._wake.clear()
        await self.client.settle()

    def wake(self) -> None:
        """Start the next cycle now (the management cluster's first list came in after a
        cycle that ran without it: its clusters should not wait a whole interval)."""
        self._wake.set()

    def report_cycle_length(self, elapsed: float) -> None:
        """Warn when a cycle outlasts the interval, once per change of its causes."""
        stats = self.stats
        _say(self.warnings.cycle_length(elapsed, stats.last_timed_out, stats.last_slot_waits))

    async def run_cycle(self) -> None:
        started = time.monotonic()
        round_ = _Round(asyncio.Semaphore(self.settings.concurrency))
        self._probes_started_at = asyncio.get_running_loop().time()
        async with asyncio.TaskGroup() as group:
            # Clusters that timed out last time are probed first, before the scan: their
            # timeouts then start with the cycle, so a cycle with hung API servers ends
            # about one timeout after it starts, not one timeout after the scan and the
            # other clusters' tasks. They are probed as the last
            # scan knew them, as if this scan had come a moment later; a cluster this
            # scan removes has its result dropped (ClusterTable.record).
            early = await self._start_probes(
                group,
                round_,
                [
                    s.cluster
                    async for s in sliced(self.table.probeable())
                    if s.last is not None and s.last.reason is Reason.TIMEOUT
                ],
                suspect=True,
            )
            discovery = await self._discover()
            if self._scan_again(discovery, time.monotonic() - started):
                assert discovery.rescan_in is not None
                await asyncio.sleep(discovery.rescan_in + RESCAN_MARGIN_S)
                await self._discover()
            probed = {c.name: c for c, _ in early}
            # Clusters, not their states: a list that held the states every probe replaces
            # freed them all in one step at its end, 60 ms at 20,000 clusters on a loaded
            # machine (bench/RESULTS.md); each state now goes as its probe records.
            others = [
                s.cluster
                async for s in sliced(self.table.probeable())
                if probed.get(s.cluster.name) != s.cluster  # a changed one: probed anew
            ]
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            infinity = resource.RLIM_INFINITY
            _say(
                self.warnings.open_files(
                    None if soft == infinity else soft,
                    len(early) + len(others),
                    self.client.held,
                    None if hard == infinity else hard,
                )
            )
            rest = await self._start_probes(group, round_, others)
        # Every pass over the clusters from here on a slice a turn (``sliced``): at 20,000
        # clusters each is tens of milliseconds, and all of them in one turn were the
        # probe loop's longest turns (bench/RESULTS.md).
        cycle_duration = time.monotonic() - started
        states = self.table.states
        targets = [
            t async for t in sliced((*early, *rest)) if _current(states.get(t[0].name), t[0])
        ]
        after = [states[c.name] async for c, _ in sliced(targets)]
        stats = self.stats
        stats.cycles_total += 1
        stats.cycle_duration = cycle_duration
        stats.last_timed_out = tuple(
            [
                s.cluster.name
                async for s in sliced(after)
                if s.last is not None and s.last.reason is Reason.TIMEOUT
            ]
        )
        stats.last_slot_waits = round_.slot_waits
        stats.last_cycle_end = time.time()
        await self.publish()
        # What the cycle leaves to do comes after its results are out, off its clock: at
        # the start of a cycle, the housekeeping of a large fleet would delay its first
        # probes (the hung clusters' timeouts start with them), and the reconnections are
        # a TLS handshake per timed-out cluster.
        await self._forget_what_left(targets, self._probes_started_at)
        for i, (name, api) in enumerate(round_.timed_out):
            if i and i % START_SLICE == 0:
                await next_turn()  # each starts a connection: a slice a turn
            state = states.get(name)
            if state is not None and state.cluster.endpoint.rstrip("/") == api.endpoint:
                self.client.reconnect_later(name, api)
        ok = len([s async for s in sliced(after) if s.last is not None and s.last.success])
        log.info(
            "cycle %d: %d clusters, %d probed, %d ok, %d failing, %.2fs",
            stats.cycles_total,
            len(self.table.states),
            len(targets),
            ok,
            len(targets) - ok,
            stats.cycle_duration,
        )

    async def _start_probes(
        self,
        group: asyncio.TaskGroup,
        round_: _Round,
        clusters: Sequence[Cluster],
        *,
        suspect: bool = False,
    ) -> list[tuple[Cluster, ContextConfig | None]]:
        """A probe task per cluster, with its context; the clusters and contexts, in order.

        ``suspect``: they timed out last cycle, and take no slot (:class:`Slot`). Started
        :data:`START_SLICE` at a time, the loop turning in between (their first steps run
        then): the first steps of 5,000 tasks in one turn held the loop 130-150 ms, those
        of 250 early ones 60-100 ms.
        """
        targets: list[tuple[Cluster, ContextConfig | None]] = []
        for i, cluster in enumerate(clusters):
            if i and i % START_SLICE == 0:
                await next_turn()
            ctx = self.discovery.context_config(cluster)
            targets.append((cluster, ctx))
            group.create_task(
                self._probe_cluster(round_, cluster, ctx, suspect),
                name=f"probe {cluster.name}",
            )
        return targets

    async def _forget_what_left(
        self,
        targets: Sequence[tuple[Cluster, ContextConfig | None]],
        used_since: float | None,
    ) -> None:
        """Close and forget what clusters gone from discovery held, after a cycle.

        Their connections and credentials, the checks' memory of them; and connections
        made with superseded credentials: on an endpoint this cycle used, those not used
        since ``used_since``, the start of this cycle's probes (``FleetClient.forget``).
        """
        probed = [ctx async for _, ctx in sliced(targets) if ctx is not None]
        discovered = {name: s.cluster async for name, s in sliced(list(self.table.states.items()))}
        await self.client.forget(probed, discovered, used_since)
        for check in self.checks:
            if isinstance(check, RetainingCheck):
                check.retain(discovered.keys())

    def _scan_again(self, discovery: Discovery, elapsed: float) -> bool:
        """Whether to scan again in this cycle, ``discovery.rescan_in`` from now.

        A file was caught changing (``fleetwatch.discovery.settle``); its last good version stands
        meanwhile. It is read once it has held still, at most ``SETTLE_SECONDS`` away:
        in this cycle when that comes before the next one, and always in the first cycle
        (its publication makes the exporter ready, and a file written just before start,
        by an init container say, belongs in it). Once: a file that keeps changing waits
        for a later cycle. Not by waking a cycle of its own: an extra probe of every
        cluster would bring a failing one to the threshold of consecutive failures
        sooner than the interval says.
        """
        if discovery.rescan_in is None:
            return False
        first = self.stats.cycles_total == 0
        return first or elapsed + discovery.rescan_in < self.settings.interval

    async def _discover(self) -> Discovery:
        """Scan, follow the scan in the table, and publish what it changed."""
        # Parsing a changed kubeconfig of thousands of contexts takes a second: off the
        # loop (the early probes go on meanwhile).
        discovery, readable = await asyncio.to_thread(self._scan)
        async for note in sliced(self.table.follow_discovery(discovery, readable)):
            _say(note)
        seen = (discovery.clusters, readable)
        if discovery.new_problems or not await _same_scan(seen, self._last_seen):
            # New or removed clusters show on /metrics now, not a timeout later. When the
            # scan found what it found last time, the last publication still says it all:
            # one rendering per cycle instead of two.
            await self.publish()
        self._last_seen = seen
        return discovery

    def _scan(self) -> tuple[Discovery, dict[str, bool]]:
        """Discovery plus "is it a readable file" per distinct kubeconfig_secret_ref."""
        discovery = self.discovery.scan()
        refs = {c.kubeconfig_secret_ref for c in discovery.clusters}
        return discovery, {ref: self.discovery.probeable(ref) for ref in refs}

    # -- one cluster ------------------------------------------------------------------

    async def _probe_cluster(
        self, round_: _Round, cluster: Cluster, ctx: ContextConfig | None, suspect: bool = False
    ) -> None:
        slot = Slot(None if suspect else round_.semaphore, self.client.turns)
        await slot.acquire()  # the probe's timeout starts once it has a slot, not before
        try:
            if ctx is None:
                failed = ProbeResult(False, Reason.CREDENTIALS, 0.0, None, "context not found")
                probed = Probed(failed)
            else:
                self.stats.probes_started += 1
                probed = await self.client.probe(cluster, ctx, slot)
        except Exception as exc:  # a bug must not cost the other clusters their cycle
            log.exception("probe of %s failed unexpectedly", cluster.name)
            detail = f"internal error {type(exc).__name__}"
            probed = Probed(ProbeResult(False, Reason.HTTP_ERROR, 0.0, None, detail))
        finally:
            slot.release()
            round_.slot_waits += slot.waited
        if not _current(self.table.states.get(cluster.name), cluster):
            return  # an early probe of a cluster the scan removed or changed meanwhile
        result, api, lost = probed
        _say(self.table.record(cluster.name, result, time.time()))
        if lost is not None:
            round_.timed_out.append((cluster.name, lost))
        if api is not None and self.checks:
            async with round_.semaphore:
                await self._run_checks(cluster, api, result)

    async def _run_checks(self, cluster: Cluster, api: ApiClient, result: ProbeResult) -> None:
        errors = self.stats.check_errors

        async def one(check: ClusterCheck) -> CheckResult | Unchanged | None:
            try:
                async with asyncio.timeout(self.settings.timeout):
                    return await check.run(cluster, api, result)
            except Exception as exc:  # a broken check costs its own series, nothing else
                errors[check.name] = errors.get(check.name, 0) + 1
                log.warning(
                    "cluster %s: check %s failed: %s",
                    cluster.name,
                    check.name,
                    "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__,
                )
                return None

        if len(self.checks) == 1:  # the usual case: no task of its own for one check
            outcomes: Sequence[CheckResult | Unchanged | None] = (await one(self.checks[0]),)
        else:
            outcomes = await asyncio.gather(*(one(c) for c in self.checks))
        self.table.set_checks(cluster.name, outcomes, self._keeper)

    # -- publishing -------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return build_snapshot(self.table, self._families, self.stats, self.settings)

    async def publish(self) -> None:
        await self._publish(self.snapshot())
