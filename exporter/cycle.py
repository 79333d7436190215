"""The probe cycle: re-scan, probe every probeable cluster concurrently, keep its state.

Every ``interval`` seconds: discovery re-scans (cheap when nothing changed), every
probeable cluster is probed under a semaphore of ``concurrency``, each probe (credentials
included) bounded by ``timeout``, then the per-cluster checks of the extension seam run.
A probe holds its slot while it works (credentials, connecting, the TLS handshake, sending)
and gives it back while it waits for the answer: waiting costs nothing, so a thousand hung
API servers never hold up the others, while the CPU-heavy part stays bounded. Each phase
ends with :meth:`Monitor.publish` handing an immutable :class:`Snapshot` to the exposition:
scrapes serve the last snapshot and never wait for a probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from exporter.checks import CheckResult, ClusterCheck, MetricFamily
from exporter.credentials import CredentialCache, CredentialsError
from exporter.discovery import Cluster, ContextConfig, Discovery, probeable
from exporter.http11 import HttpError, HttpPool
from exporter.probe import ApiClient, ProbeResult, Reason, limit_tls_read_buffers, probe

log = logging.getLogger(__name__)

#: Seconds an idle kept-alive connection may wait for its next probe (at least two intervals).
IDLE_CONNECTION_SECONDS = 3600.0
#: Descriptors the exporter needs besides one per kept connection: its listener, scrapes,
#: kubeconfig reads, credential temp files, direct etcd checks.
OPEN_FILES_MARGIN = 256


class DiscoverySource(Protocol):
    """What the cycle needs from discovery (``exporter.discovery.Discoverer``)."""

    def scan(self) -> Discovery: ...

    def context_config(self, cluster: Cluster) -> ContextConfig | None: ...


@dataclass
class ClusterState:
    """What the exporter remembers about one cluster between cycles."""

    cluster: Cluster
    probeable: bool = False
    last: ProbeResult | None = None
    consecutive_failures: int = 0
    last_success: float = 0.0  #: epoch seconds, 0 if never
    failures: dict[Reason, int] = field(default_factory=dict)
    checks: dict[str, CheckResult] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterView:
    """Immutable copy of a :class:`ClusterState` for rendering in another thread."""

    cluster: Cluster
    probeable: bool
    success: bool | None  #: None before the first probe
    duration: float
    consecutive_failures: int
    last_success: float
    failures: tuple[tuple[Reason, int], ...]
    checks: tuple[CheckResult, ...]


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


@dataclass(frozen=True)
class CycleSettings:
    interval: float  #: seconds between the starts of two cycles
    timeout: float  #: seconds one cluster may take (credentials + probe), and each check
    concurrency: int  #: probes working (not waiting for an answer) at the same time
    #: idle kept-alive connections kept between cycles; None: one per cluster. OpenSSL
    #: keeps 24-34 KiB per idle TLS connection, so 10,000 clusters hold 300+ MB; past the
    #: bound a probe pays a TLS handshake (about 1.5 ms of CPU) instead.
    max_idle_connections: int | None = None


class _Slot:
    """One probe's share of the cycle's concurrency: held for work, given back to wait."""

    __slots__ = ("_held", "_semaphore", "waited")

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self._semaphore = semaphore
        self._held = False
        self.waited = False  #: all slots were taken when it asked: concurrency was short

    async def acquire(self) -> None:
        if not self._held:
            if self._semaphore.locked():
                self.waited = True
            await self._semaphore.acquire()
            self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._semaphore.release()

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()


Publisher = Callable[[Snapshot], Awaitable[None]]

#: Hung clusters named in the "cycle too long" warning; the rest are counted.
_NAMED_HUNG = 5


def slow_cycle_advice(
    elapsed: float, settings: CycleSettings, timed_out: Sequence[str], slot_waits: int
) -> str:
    """Why a cycle outlasted the interval, and the flag that helps, in one line.

    A probe that runs into its timeout makes the cycle last at least that timeout (which
    defaults to the interval under 10 s), whatever the concurrency: the advice names the
    hung clusters and ``--probe.timeout``. Concurrency helps only when probes waited for
    a slot.
    """
    head = f"probe cycle took {elapsed:.1f}s, longer than the interval of {settings.interval:g}s"
    causes: list[str] = []
    if timed_out:
        names = ", ".join(sorted(timed_out)[:_NAMED_HUNG])
        if len(timed_out) > _NAMED_HUNG:
            names += f" and {len(timed_out) - _NAMED_HUNG} more"
        causes.append(
            f"{len(timed_out)} cluster(s) gave no answer within --probe.timeout "
            f"{settings.timeout:g}s ({names}); "
            + (
                "set --probe.timeout below --probe.interval"
                if settings.timeout >= settings.interval
                else "lower --probe.timeout or raise --probe.interval"
            )
        )
    if slot_waits:
        causes.append(
            f"{slot_waits} probe(s) waited for one of the {settings.concurrency} slots; "
            "raise --probe.concurrency"
        )
    if not causes:
        causes.append("no probe timed out or waited for a slot; raise --probe.interval")
    return f"{head}: " + "; ".join(causes)


class Monitor:
    """Owns discovery, credentials, the HTTP session and the per-cluster state."""

    def __init__(
        self,
        settings: CycleSettings,
        discovery: DiscoverySource,
        publish: Publisher,
        checks: Sequence[ClusterCheck] = (),
    ) -> None:
        self.settings = settings
        self.discovery = discovery
        self._publish = publish
        self.checks = tuple(checks)
        self.credentials = CredentialCache()
        self.states: dict[str, ClusterState] = {}
        self._warned_unprobeable: set[str] = set()
        self._session: aiohttp.ClientSession | None = None
        #: the probes' kept-alive connections (the lean client of exporter/http11.py)
        self.http = HttpPool(settings.max_idle_connections)
        #: reconnections after a timeout, run between cycles (see _reconnect_later)
        self._reconnects: dict[str, asyncio.Task[None]] = {}
        self._timed_out: list[tuple[str, ApiClient]] = []  #: this cycle's, reconnected after it
        self._reconnect_slots = asyncio.Semaphore(settings.concurrency)
        self.discovery_errors_total = 0
        self.check_errors: dict[str, int] = {c.name: 0 for c in self.checks}
        self.cycles_total = 0
        self.cycle_duration = 0.0
        self.last_cycle_end = 0.0
        self.probes_started = 0  #: total probes sent (tests check "never probed")
        #: clusters whose probe timed out in the last cycle, and probes that waited for a slot
        self.last_timed_out: tuple[str, ...] = ()
        self.last_slot_waits = 0
        #: the causes of the last "cycle too long" warning, so it is said once per change
        self._slow_situation: tuple[frozenset[str], bool] | None = None
        self._slot_waits = 0
        #: the connection count the open-files warning was last given for (said once)
        self._open_files_warned_for = 0

    async def __aenter__(self) -> Monitor:
        limit_tls_read_buffers()  # one kept-alive TLS connection per cluster: keep them small
        # One connector for the life of the exporter: keep-alive across cycles. The limit
        # is generous; the semaphore is what bounds concurrent clusters.
        connector = aiohttp.TCPConnector(
            limit=max(100, self.settings.concurrency * 4), keepalive_timeout=3600
        )
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._reconnects.values():
            task.cancel()
        await asyncio.gather(*self._reconnects.values(), return_exceptions=True)
        self._reconnects.clear()
        self.http.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use `async with Monitor(...)`"
        return self._session

    # -- the loop ---------------------------------------------------------------------

    async def run_forever(self) -> None:
        """Run cycles every ``interval`` seconds until cancelled."""
        while True:
            started = time.monotonic()
            try:
                await self.run_cycle()
            except Exception:  # a bug in one cycle must not stop the next ones
                log.exception("probe cycle failed; the next one starts on schedule")
            elapsed = time.monotonic() - started
            self.report_cycle_length(elapsed)
            # Scheduling, not synchronisation: wait for the next cycle's start.
            await asyncio.sleep(max(0.0, self.settings.interval - elapsed))

    def report_cycle_length(self, elapsed: float) -> None:
        """Warn when a cycle outlasts the interval, once per change of its causes.

        A hung cluster keeps every cycle long for as long as it hangs: one warning when
        the situation starts or changes (other clusters hang, slots start or stop being
        short), one info line when cycles fit again, never one per cycle.
        """
        if elapsed <= self.settings.interval:
            if self._slow_situation is not None:
                log.info("probe cycles fit in the interval again (%.1fs)", elapsed)
            self._slow_situation = None
            return
        situation = (frozenset(self.last_timed_out), self.last_slot_waits > 0)
        if situation == self._slow_situation:
            return
        self._slow_situation = situation
        log.warning(
            "%s",
            slow_cycle_advice(elapsed, self.settings, self.last_timed_out, self.last_slot_waits),
        )

    async def run_cycle(self) -> None:
        started = time.monotonic()
        self._timed_out.clear()
        self._slot_waits = 0
        # Connections of clusters no longer probed (gone from the kubeconfigs) are closed
        # after an hour idle, as aiohttp's keepalive_timeout did.
        self.http.prune_idle(max(IDLE_CONNECTION_SECONDS, 2 * self.settings.interval))
        # Parsing a changed kubeconfig of thousands of contexts takes a second: off the loop.
        discovery, readable = await asyncio.to_thread(self._scan)
        self._apply_discovery(discovery, readable)
        await self.publish()
        targets: list[tuple[ClusterState, ContextConfig | None]] = []
        for state in self.states.values():
            if state.probeable:
                targets.append((state, self.discovery.context_config(state.cluster)))
        # Clusters that timed out last time go first: their timeouts then start with the
        # cycle, so a cycle with hung API servers ends about one timeout after it starts
        # instead of one timeout after the last of them got a slot.
        targets.sort(key=lambda t: t[0].last is None or t[0].last.reason is not Reason.TIMEOUT)
        self._check_open_files(len(targets))
        live = {self.credentials.key(ctx) for _, ctx in targets if ctx is not None}
        self.credentials.prune(live)
        semaphore = asyncio.Semaphore(self.settings.concurrency)
        async with asyncio.TaskGroup() as group:
            for state, ctx in targets:
                group.create_task(
                    self._probe_cluster(semaphore, state, ctx), name=f"probe {state.cluster.name}"
                )
        self.cycles_total += 1
        self.cycle_duration = time.monotonic() - started
        self.last_timed_out = tuple(
            state.cluster.name
            for state, _ in targets
            if state.last is not None and state.last.reason is Reason.TIMEOUT
        )
        self.last_slot_waits = self._slot_waits
        for name, api in self._timed_out:  # after the cycle: handshakes off its clock
            self._reconnect_later(name, api)
        self._timed_out.clear()
        self.last_cycle_end = time.time()
        await self.publish()
        ok = sum(1 for state, _ in targets if state.last is not None and state.last.success)
        log.info(
            "cycle %d: %d clusters, %d probed, %d ok, %d failing, %.2fs",
            self.cycles_total,
            len(self.states),
            len(targets),
            ok,
            len(targets) - ok,
            self.cycle_duration,
        )

    def _check_open_files(self, probed: int) -> None:
        """Warn (once per fleet size) when the open-files limit cannot hold the connections.

        Every probed cluster keeps a connection open between cycles (up to
        --probe.max-idle-connections); past the limit every accept and connect fails with
        EMFILE, the /metrics listener's included: at 10,000 clusters under a 20,000 limit
        the exporter stopped answering scrapes (bench/RESULTS.md).
        """
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        bound = self.settings.max_idle_connections
        needed = (probed if bound is None else min(probed, bound)) + OPEN_FILES_MARGIN
        if soft == resource.RLIM_INFINITY or needed <= soft:
            self._open_files_warned_for = 0
            return
        if needed > self._open_files_warned_for:
            self._open_files_warned_for = needed
            log.warning(
                "open-files limit %d is below the %d this fleet needs (%d clusters keep a "
                "connection each, plus %d for the rest): raise the limit (LimitNOFILE=, "
                "ulimit -n) or set --probe.max-idle-connections",
                soft,
                needed,
                probed,
                OPEN_FILES_MARGIN,
            )

    def _scan(self) -> tuple[Discovery, dict[str, bool]]:
        """Discovery plus "is it a readable file" per distinct kubeconfig_secret_ref."""
        discovery = self.discovery.scan()
        refs = {c.kubeconfig_secret_ref for c in discovery.clusters}
        return discovery, {ref: probeable(ref) for ref in refs}

    def _apply_discovery(self, discovery: Discovery, readable: dict[str, bool]) -> None:
        for problem in discovery.new_problems:
            log.warning("kubeconfig problem, skipped: %s", problem)
        self.discovery_errors_total += len(discovery.new_problems)
        names = {c.name for c in discovery.clusters}
        for gone in [n for n in self.states if n not in names]:
            del self.states[gone]
            self._warned_unprobeable.discard(gone)
            log.info("cluster %s is no longer in any kubeconfig; its series are dropped", gone)
        for cluster in discovery.clusters:
            state = self.states.get(cluster.name)
            if state is None:
                state = self.states[cluster.name] = ClusterState(cluster)
                log.info(
                    "discovered cluster %s (%s) in %s",
                    cluster.name,
                    cluster.endpoint,
                    cluster.kubeconfig_secret_ref,
                )
            elif state.cluster != cluster:
                state.cluster = cluster  # endpoint or file changed: same cluster, new address
            state.probeable = readable.get(cluster.kubeconfig_secret_ref, False)
            if not state.probeable:
                if cluster.name not in self._warned_unprobeable:
                    self._warned_unprobeable.add(cluster.name)
                    log.warning(
                        "cluster %s is not probed: kubeconfig_secret_ref %r is not a readable file",
                        cluster.name,
                        cluster.kubeconfig_secret_ref[:200],
                    )
            else:
                self._warned_unprobeable.discard(cluster.name)

    # -- one cluster ------------------------------------------------------------------

    async def _probe_cluster(
        self, semaphore: asyncio.Semaphore, state: ClusterState, ctx: ContextConfig | None
    ) -> None:
        slot = _Slot(semaphore)
        await slot.acquire()  # the probe's timeout starts once it has a slot, not before
        try:
            result, api = await self._probe_one(state.cluster, ctx, slot)
        except Exception as exc:  # a bug must not cost the other clusters their cycle
            log.exception("probe of %s failed unexpectedly", state.cluster.name)
            detail = f"internal error {type(exc).__name__}"
            result, api = ProbeResult(False, Reason.HTTP_ERROR, 0.0, None, detail), None
        finally:
            slot.release()
            self._slot_waits += slot.waited
        self._record(state, result)
        if api is not None and result.reason is Reason.TIMEOUT:
            self._timed_out.append((state.cluster.name, api))
        if api is not None and self.checks:
            async with semaphore:
                await self._run_checks(state, api, result)

    def _reconnect_later(self, name: str, api: ApiClient) -> None:
        """Open a new connection for a cluster whose probe timed out, in the background.

        Called when the cycle has ended, so the handshakes never slow down the cycle.

        The timed-out connection is closed (its answer may still come), so a hung API
        server would cost a TLS handshake, under a slot, at the start of every cycle, and
        with a thousand of them the last timeouts would start seconds late. Connecting
        right away, between cycles, lets the next probe send at once. The task is the
        Monitor's: one per cluster at most, cancelled and awaited when it stops.
        """
        if name in self._reconnects:
            return
        creds = api.credentials
        timeout = self.settings.timeout

        async def reconnect() -> None:
            try:
                async with self._reconnect_slots, asyncio.timeout(timeout):
                    await self.http.preconnect(
                        api.endpoint,
                        context=creds.ssl_context,
                        server_hostname=creds.server_hostname,
                    )
            except (HttpError, TimeoutError):
                pass  # the next probe finds out and reports it
            finally:
                self._reconnects.pop(name, None)

        self._reconnects[name] = asyncio.create_task(reconnect(), name=f"reconnect {name}")

    async def _probe_one(
        self, cluster: Cluster, ctx: ContextConfig | None, slot: _Slot
    ) -> tuple[ProbeResult, ApiClient | None]:
        timeout = self.settings.timeout
        start = time.perf_counter()
        if ctx is None:
            return ProbeResult(False, Reason.CREDENTIALS, 0.0, None, "context not found"), None
        self.probes_started += 1
        api: ApiClient | None = None
        try:
            async with asyncio.timeout(timeout):
                try:
                    creds, fresh = await self.credentials.resolve(ctx)
                except TimeoutError:
                    raise CredentialsError(
                        f"resolving the credentials took longer than {timeout:g}s"
                    ) from None
                api = ApiClient(self.http, self.session, cluster.endpoint, creds)
                reconnecting = self._reconnects.get(cluster.name)
                if reconnecting is not None:  # its connection is on the way: wait, slot-free
                    slot.release()
                    await asyncio.wait([reconnecting])  # its outcome: the probe will see
                remaining = max(0.001, timeout - (time.perf_counter() - start))
                result = await probe(api, remaining, slot)
                if result.reason is Reason.UNAUTHORIZED and not fresh:
                    # Cached credentials refused: an exec token expired or was revoked, a
                    # tokenFile was rotated. Resolve them again and try once more.
                    await slot.acquire()
                    self.credentials.invalidate(ctx, creds)
                    creds, _ = await self.credentials.resolve(ctx)
                    api = ApiClient(self.http, self.session, cluster.endpoint, creds)
                    remaining = max(0.001, timeout - (time.perf_counter() - start))
                    result = await probe(api, remaining, slot)
        except CredentialsError as exc:
            return ProbeResult(
                False, Reason.CREDENTIALS, time.perf_counter() - start, None, str(exc)
            ), None
        except TimeoutError:
            if api is not None:  # it had a connection (or was getting one): reconnect later
                self._timed_out.append((cluster.name, api))
            return ProbeResult(
                False, Reason.TIMEOUT, time.perf_counter() - start, None, "no answer in time"
            ), None
        return result, api

    def _record(self, state: ClusterState, result: ProbeResult) -> None:
        name = state.cluster.name
        was_failing = state.consecutive_failures > 0
        state.last = result
        if result.success:
            if was_failing:
                log.info(
                    "cluster %s: probe succeeded again after %d failures",
                    name,
                    state.consecutive_failures,
                )
            state.consecutive_failures = 0
            state.last_success = time.time()
            return
        assert result.reason is not None
        state.consecutive_failures += 1
        state.failures[result.reason] = state.failures.get(result.reason, 0) + 1
        log.warning(
            "cluster %s: probe failed (%s): %s [%d in a row]",
            name,
            result.reason.value,
            result.detail,
            state.consecutive_failures,
        )

    async def _run_checks(self, state: ClusterState, api: ApiClient, result: ProbeResult) -> None:
        async def one(check: ClusterCheck) -> tuple[str, CheckResult | None]:
            try:
                async with asyncio.timeout(self.settings.timeout):
                    return check.name, await check.run(state.cluster, api, result)
            except Exception as exc:  # a broken check costs its own series, nothing else
                self.check_errors[check.name] = self.check_errors.get(check.name, 0) + 1
                log.warning(
                    "cluster %s: check %s failed: %s",
                    state.cluster.name,
                    check.name,
                    "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__,
                )
                return check.name, None

        outcomes = await asyncio.gather(*(one(c) for c in self.checks))
        state.checks = {name: res for name, res in outcomes if res is not None}

    # -- publishing -------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        views = tuple(
            ClusterView(
                cluster=s.cluster,
                probeable=s.probeable,
                success=None if s.last is None else s.last.success,
                duration=0.0 if s.last is None else s.last.duration,
                consecutive_failures=s.consecutive_failures,
                last_success=s.last_success,
                failures=tuple(sorted(s.failures.items())),
                checks=tuple(s.checks.values()),
            )
            for s in self.states.values()
        )
        families: dict[str, MetricFamily] = {}
        for check in self.checks:
            for fam in check.families:
                families.setdefault(fam.name, fam)
        return Snapshot(
            clusters=views,
            check_families=tuple(families.values()),
            check_errors=tuple(sorted(self.check_errors.items())),
            discovery_errors_total=self.discovery_errors_total,
            cycles_total=self.cycles_total,
            cycle_duration=self.cycle_duration,
            last_cycle_end=self.last_cycle_end,
            interval=self.settings.interval,
            timeout=self.settings.timeout,
        )

    async def publish(self) -> None:
        await self._publish(self.snapshot())
