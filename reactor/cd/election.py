"""Leader election's requests: the Lease taken, renewed and released (rules: ``reactor.cd.lease``).

:class:`LeaderElector` runs as one task beside the actuator, e.g. with the defaults:

- every ``retry_period`` (2 s), a replica that does not hold the Lease reads it and, when
  ``reactor.cd.lease`` says it may, writes itself in (``PUT`` with the ``resourceVersion``
  read; ``POST`` when there is no Lease yet): one ``GET`` per period while it waits;
- the holder renews it every ``retry_period`` with one ``PUT`` carrying the
  ``resourceVersion`` of its last write (no ``GET``), and reads it again only when that
  fails; a ``409`` means someone else changed it, and the holder stops acting at once;
- :meth:`LeaderElector.is_leader` answers from the clock alone (``still_leading``), so a
  holder whose renewals hang stops acting at its renew deadline even while a request is
  still in the air; each request waits at most a third of the renew deadline, so a holder
  tries again before it;
- :meth:`LeaderElector.may_write` says whether a CD write may still leave, asked by the
  actuator's writes at the last moment before the socket (``reactor.cd.fence``): the
  holder still acts, and the write, given its whole timeout, ends a margin before the
  Lease may pass to another replica;
- listeners (the actuator) hear each change of "this replica acts" after the attempt that
  made it, and :meth:`LeaderElector.release` gives the Lease up on a clean stop.

The identity is the host name (a pod's name) and a random suffix, as client-go's
controllers name themselves: a restarted process never takes its predecessor's Lease for
its own (its informers are not warm yet: it waits like any other).

Metrics, e.g.::

    fleetwatch_reactor_cd_leader 1
    fleetwatch_reactor_cd_leader_transitions_total 1
    fleetwatch_reactor_cd_lease_failures_total{reason="forbidden"} 3

I/O (asyncio, the management API through ``reactor.cd.kubewrite``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from fleetwatch.common import metricnames
from fleetwatch.kube.kubeapi import KubeApiError
from reactor.cd.lease import (
    LeaderElection,
    Lease,
    SeenLease,
    claim,
    lease_object,
    may_take,
    may_write,
    micro_time,
    observe,
    read_lease,
    released,
    still_leading,
)

log = logging.getLogger(__name__)

#: Where a pod's service account says which namespace the pod runs in.
POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class LeaseClient(Protocol):
    """What the elector needs of ``reactor.cd.kubewrite.KubeWriter``."""

    async def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = ...,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]: ...


class LeaderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.leader = Gauge(
            metricnames.REACTOR_CD_LEADER,
            "1 while this replica holds the CD Lease and acts on the Flux and Argo CD "
            "objects; 0 while another one does (or none can).",
            registry=registry,
        )
        self.transitions = Counter(
            metricnames.REACTOR_CD_LEADER_TRANSITIONS,
            "Times this replica began to act on the CD objects (took the Lease).",
            registry=registry,
        )
        self.failures = Counter(
            metricnames.REACTOR_CD_LEASE_FAILURES,
            "Requests for the CD Lease that failed, by the management API's error reason.",
            ["reason"],
            registry=registry,
        )


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def lease_namespace(settings: LeaderElection, pod_namespace: Path = POD_NAMESPACE_FILE) -> str:
    """The Lease's namespace: the flag's, else the pod's, else ``default``."""
    if settings.namespace:
        return settings.namespace
    try:
        found = pod_namespace.read_text().strip()
    except OSError:
        found = ""
    return found or "default"


class LeaderElector:
    """The Lease's holder or candidate (module docstring)."""

    def __init__(
        self,
        api: LeaseClient,
        settings: LeaderElection,
        namespace: str,
        metrics: LeaderMetrics,
        *,
        identity: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.settings = settings
        self.namespace = namespace
        self.metrics = metrics
        self.identity = identity or default_identity()
        self.clock = clock
        self.wall = wall
        #: called with True when this replica begins to act, False when it stops
        self.listeners: list[Callable[[bool], None]] = []
        self._observed: SeenLease | None = None
        #: when this replica's last successful write as the holder began (monotonic)
        self._renewed_at: float | None = None
        self._leading = False
        self._holder_logged: str | None = None
        self._failure_logged: str | None = None
        metrics.leader.set(0)

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.settings.name}"

    @property
    def collection(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.settings.name}"

    @property
    def request_timeout_s(self) -> float:
        return self.settings.request_timeout_s

    def is_leader(self) -> bool:
        """Does this replica act now? From the clock alone (``reactor.cd.lease``)."""
        return still_leading(self._renewed_at, self.clock(), self.settings)

    def may_write(self, timeout: float) -> bool:
        """May a write taking up to ``timeout`` leave now (``reactor.cd.lease.may_write``,
        the fence)? From the clock alone, so it can be asked at the last moment."""
        return may_write(self._renewed_at, self.clock(), timeout, self.settings)

    def renewed_ago(self) -> float | None:
        """Seconds since the last successful renewal began (None: never, or lost)."""
        return None if self._renewed_at is None else self.clock() - self._renewed_at

    async def run(self) -> None:
        """Until cancelled: try to take or renew the Lease every retry period."""
        log.info("cd: leader election on %s as %s", self.where, self.identity)
        while True:
            await self.try_acquire_or_renew()
            self._announce()
            period = self.settings.retry_period_s
            delay = period if self._leading else period * random.uniform(1.0, 1.2)
            if self._renewed_at is not None:  # wake at the deadline to say it passed
                deadline = self._renewed_at + self.settings.renew_deadline_s
                delay = min(delay, max(0.0, deadline - self.clock()))
            await asyncio.sleep(delay)  # product pacing: the retry period

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this replica holds the Lease after it."""
        started = self.clock()
        stamp = micro_time(self.wall())
        try:
            observed = self._observed
            holding = observed is not None and observed.lease.record.holder == self.identity
            if not (holding and self._renewed_at is not None):
                lease = await self._get()
                if lease is None:
                    record = claim(None, self.identity, self.settings.lease_duration_s, stamp)
                    body = lease_object(self.namespace, self.settings.name, record)
                    self._took(await self._send("POST", self.collection, body), started)
                    return True
                observed = observe(self._observed, lease, self.clock())
                self._observed = observed
                if not may_take(observed, self.identity, self.clock()):
                    self._renewed_at = None
                    self._log_holder(observed.lease.record.holder)
                    return False
            assert observed is not None
            lease = observed.lease
            record = claim(lease.record, self.identity, self.settings.lease_duration_s, stamp)
            body = lease_object(self.namespace, self.settings.name, record, lease.resource_version)
            self._took(await self._send("PUT", self.path, body), started)
            return True
        except KubeApiError as exc:
            self._failed(exc)
            return self.is_leader()

    async def release(self) -> None:
        """Give the Lease up (a clean stop): the next replica takes it at its next try."""
        observed = self._observed
        if not self.is_leader() or observed is None:
            return
        self._renewed_at = None
        record = released(observed.lease.record, micro_time(self.wall()))
        body = lease_object(
            self.namespace, self.settings.name, record, observed.lease.resource_version
        )
        try:
            await self._send("PUT", self.path, body)
            log.info("cd: %s released", self.where)
        except KubeApiError as exc:
            self._failed(exc)
        self._announce("released")

    # -- the requests and what they say ----------------------------------------------

    async def _get(self) -> Lease | None:
        try:
            return read_lease(await self._send("GET", self.path))
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def _send(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return await self.api.send(method, path, body, timeout=self.request_timeout_s)

    def _took(self, written: dict[str, Any], started: float) -> None:
        self._observed = SeenLease(read_lease(written), self.clock())
        self._renewed_at = started
        self._failure_logged = None

    def _failed(self, exc: KubeApiError) -> None:
        self.metrics.failures.labels(exc.reason).inc()
        if exc.status == 409:  # someone else wrote it since we read it: they hold it now
            self._observed = None
            self._renewed_at = None
            log.debug("cd: %s changed under this replica: read again", self.where)
            return
        if self._renewed_at is not None and not self.is_leader():
            self._renewed_at = None
        hint = ""
        if exc.status == 403:
            hint = f" (the reactor needs get, create and update on leases in {self.namespace})"
        if self._failure_logged != exc.reason:
            self._failure_logged = exc.reason
            log.warning("cd: %s: %s%s; tried again every retry period", self.where, exc, hint)
        else:
            log.debug("cd: %s: %s", self.where, exc)

    def _log_holder(self, holder: str) -> None:
        if holder != self._holder_logged:
            self._holder_logged = holder
            log.info(
                "cd: %s is held by %s: this replica waits (its objects stay listed)",
                self.where,
                holder,
            )

    def _announce(self, why: str = "not renewed in time") -> None:
        leading = self.is_leader()
        if leading == self._leading:
            return
        self._leading = leading
        self.metrics.leader.set(int(leading))
        if leading:
            self.metrics.transitions.inc()
            self._holder_logged = self.identity
            transitions = self._observed.lease.record.transitions if self._observed else 0
            log.info(
                "cd: this replica (%s) now acts on the CD objects: %s taken (transition %d)",
                self.identity,
                self.where,
                transitions,
            )
        else:  # a release is a clean stop; anything else is worth a look
            log.log(
                logging.INFO if why == "released" else logging.WARNING,
                "cd: this replica (%s) stopped acting on the CD objects: %s %s",
                self.identity,
                self.where,
                why,
            )
        for listener in self.listeners:
            listener(leading)
