"""One reactor replica acts on the CD objects at a time: leader election over a Lease, pure.

With several replicas on PostgreSQL every one mirrors nothing and patches nothing but the
one that holds a ``coordination.k8s.io/v1`` Lease of the management cluster, as
Kubernetes controllers elect a leader (client-go's ``leaderelection``; the same fields,
the same timing). The Lease lives in the API the actuator needs anyway, so a replica cut
off from that API stops holding it as it stops being able to act. (A database advisory
lock, the other candidate, is released on a dead peer only when its TCP connection is
found dead: minutes with the default keep-alives.)

The rules, over plain data and a monotonic clock given by the caller:

- **Who may take it** (:func:`may_take`): nobody holds it (never held, or released), or
  this replica does, or its holder has not renewed it for its ``leaseDurationSeconds``.
  "Not renewed" is measured on this replica's own clock, from when it *first saw* the
  record as it is (:class:`SeenLease`), never from the ``renewTime`` written in it: two
  machines' wall clocks may disagree, but each measures its own durations well.
- **What is written** (:func:`claim`): the holder's identity, the duration, ``renewTime``
  now; ``acquireTime`` and ``leaseTransitions`` kept on a renewal, and on a change of
  holder ``acquireTime`` now and one more transition. The write carries the
  ``resourceVersion`` that was read, so of two replicas taking an expired Lease at once
  one wins and the other gets ``409 Conflict``.
- **How long the holder acts** (:func:`still_leading`): until ``renew_deadline`` after the
  *start* of its last successful write. Another replica first sees that write after it
  started, and takes over only ``lease_duration`` after that; with the renew deadline
  shorter than the duration (two thirds of it, as client-go's 10 s of 15 s), the holder
  that cannot renew stops acting before anyone else may start.
- **Whether a write may leave** (:func:`may_write`, the fence): the holder still acts, and a
  request given its whole timeout ends before ``lease_duration - margin`` after the start
  of the last successful renewal. Nobody else may act before ``lease_duration`` after
  that start (they measure it from a later moment, when they first saw the renewal), so a
  write that passes the check, made at the last moment before the socket, cannot land
  while another replica acts. The margin (:attr:`LeaderElection.fence_margin_s`, a
  fifteenth of the duration: 1 s of 15) covers what lies between the check and the bytes
  leaving and the two machines' clocks running at slightly different rates.
- **A clean stop** (:func:`released`): the holder writes an empty holder and a duration of
  1 s, so the next replica takes over at its next try instead of a lease duration later.

Pure: no clock of its own, no I/O (``reactor.cd.election`` does the requests).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

LEASE_API_VERSION = "coordination.k8s.io/v1"

DEFAULT_LEASE_NAME = "fleetwatch-reactor-cd"
DEFAULT_LEASE_DURATION_S = 15.0


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """``--cd.leader-election.*``: which Lease, and its timing (all derived from one value)."""

    namespace: str | None = None
    """The Lease's namespace; None: the namespace the reactor's pod runs in (its service
    account's), else ``default``. Beside the reactor, so its RBAC is one namespaced Role."""
    name: str = DEFAULT_LEASE_NAME
    """The Lease's name: replicas that share it act one at a time."""
    lease_duration_s: float = DEFAULT_LEASE_DURATION_S
    """How long a Lease not renewed keeps the others waiting: the hand-over time after a
    replica's death (client-go's and kube-controller-manager's default, 15 s)."""

    @property
    def renew_deadline_s(self) -> float:
        """The holder stops acting this long after its last successful renewal began (two
        thirds of the duration: 10 s of 15, as client-go)."""
        return self.lease_duration_s * 2 / 3

    @property
    def retry_period_s(self) -> float:
        """Between two tries to take or renew the Lease (2 s of 15, as client-go): a
        holder tries several times within one renew deadline."""
        return self.lease_duration_s * 2 / 15

    @property
    def request_timeout_s(self) -> float:
        """The longest a request of the elected replica waits (a third of the renew
        deadline: 3.3 s of 15), the Lease's own and the CD writes alike: a holder tries
        again before its deadline, and a write fits in the Lease (:func:`may_write`)."""
        return self.renew_deadline_s / 3

    @property
    def fence_margin_s(self) -> float:
        """Kept between the end of a write and the earliest moment another replica may
        act (a fifteenth of the duration: 1 s of 15, 0.27 s of 4): the time between the
        check and the bytes leaving (one turn of the event loop at most) and the rate
        difference of two machines' monotonic clocks (NTP keeps it under 0.05 %: 7.5 ms
        over 15 s), with room to spare for a pause of the process."""
        return self.lease_duration_s / 15


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The Lease's spec, as leader election reads and writes it."""

    holder: str = ""
    #: ``leaseDurationSeconds`` (an integer in the API)
    duration_s: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """A Lease as read: its record and the ``resourceVersion`` a write must carry."""

    record: LeaseRecord
    resource_version: str


@dataclass(frozen=True, slots=True)
class SeenLease:
    """A Lease, and when (this replica's monotonic clock) it was first seen as it is."""

    lease: Lease
    since: float


def read_lease(obj: Mapping[str, Any]) -> Lease:
    """A Lease object (JSON) as a :class:`Lease`; fields of the wrong type read as unset,
    so a Lease another tool mangled is taken over like an expired one, not a crash."""
    meta = obj.get("metadata")
    spec = obj.get("spec")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = spec if isinstance(spec, Mapping) else {}
    holder = spec.get("holderIdentity")
    duration = spec.get("leaseDurationSeconds")
    transitions = spec.get("leaseTransitions")
    record = LeaseRecord(
        holder=holder if isinstance(holder, str) else "",
        duration_s=duration if isinstance(duration, int) and duration > 0 else 0,
        acquire_time=_text(spec.get("acquireTime")),
        renew_time=_text(spec.get("renewTime")),
        transitions=transitions if isinstance(transitions, int) and transitions > 0 else 0,
    )
    return Lease(record, str(meta.get("resourceVersion") or ""))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def lease_object(
    namespace: str, name: str, record: LeaseRecord, resource_version: str | None = None
) -> dict[str, Any]:
    """The Lease to create (no ``resource_version``) or to replace (with the one read)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.duration_s,
        "leaseTransitions": record.transitions,
    }
    if record.acquire_time is not None:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time is not None:
        spec["renewTime"] = record.renew_time
    return {"apiVersion": LEASE_API_VERSION, "kind": "Lease", "metadata": metadata, "spec": spec}


def micro_time(unix: float) -> str:
    """A Kubernetes ``MicroTime`` (RFC 3339, microseconds, UTC), as Lease times are."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def observe(previous: SeenLease | None, lease: Lease, now: float) -> SeenLease:
    """``lease`` as seen ``now``: since when it has been as it is (a renewal changes it)."""
    if previous is not None and previous.lease == lease:
        return previous
    return SeenLease(lease, now)


def may_take(observed: SeenLease, me: str, now: float) -> bool:
    """May ``me`` write itself in as the holder (module docstring)?"""
    record = observed.lease.record
    if not record.holder or record.holder == me:
        return True
    return now >= observed.since + record.duration_s


def claim(current: LeaseRecord | None, me: str, duration_s: float, stamp: str) -> LeaseRecord:
    """The record that makes (or keeps) ``me`` the holder, written at ``stamp``."""
    duration = max(1, round(duration_s))
    if current is not None and current.holder == me:
        return LeaseRecord(me, duration, current.acquire_time or stamp, stamp, current.transitions)
    transitions = 0 if current is None else current.transitions + 1
    return LeaseRecord(me, duration, stamp, stamp, transitions)


def released(current: LeaseRecord, stamp: str) -> LeaseRecord:
    """The record a holder leaves on a clean stop: nobody holds it, anyone may take it."""
    return LeaseRecord("", 1, stamp, stamp, current.transitions)


def still_leading(renewed_at: float | None, now: float, settings: LeaderElection) -> bool:
    """Does the replica whose last successful write as holder began at ``renewed_at``
    still act ``now``? None: it holds nothing."""
    return renewed_at is not None and now < renewed_at + settings.renew_deadline_s


def may_write(
    renewed_at: float | None, now: float, timeout: float, settings: LeaderElection
) -> bool:
    """May the replica whose last successful renewal began at ``renewed_at`` send, ``now``,
    a write that may take up to ``timeout``? Only while it still acts and the write ends
    ``fence_margin_s`` before the Lease may pass to another replica (module docstring)."""
    if not still_leading(renewed_at, now, settings):
        return False
    assert renewed_at is not None
    return now + timeout <= renewed_at + settings.lease_duration_s - settings.fence_margin_s
