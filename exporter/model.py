"""The exporter's shared types: what a probe found, and what a per-cluster check publishes.

Every other exporter module speaks these; they import nothing but the standard library,
so the pure modules (parsing, quorum, state, exposition) and the I/O modules (the
cycle, the probe, the checks) meet here without importing each other.

- :class:`Reason` and :class:`ProbeResult`: one probe's outcome; :func:`verdict` turns an
  answer of ``/readyz?verbose`` into it. A failed probe is data, never an exception.
  :func:`reason_class` sorts the reasons into the two classes of :class:`ReasonClass`.
- :class:`ClusterRequestError`: a request to a cluster's API server got no usable answer,
  with its reason; :func:`ok_body` says which answers are usable.
- :class:`MetricFamily`, :class:`Sample`, :class:`TargetGroup`, :class:`CheckResult`: what
  a check of the extension seam (``exporter.checks``) hands to the exposition, and
  :class:`Unchanged`: its answer when that result has not changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class Reason(StrEnum):
    """Why a probe failed: the ``reason`` label of ``fleetwatch_cluster_probe_failures_total``."""

    TIMEOUT = "timeout"  #: no complete answer within --probe.timeout
    CONNECT = "connect"  #: connection refused, reset, or closed before an answer
    TLS = "tls"  #: TLS handshake failed (unknown CA, wrong name, refused client cert)
    UNAUTHORIZED = "unauthorized"  #: 401 or 403: the credentials are not accepted
    NOT_READY = "not_ready"  #: the server answered and lists failed checks ([-] lines)
    HTTP_ERROR = "http_error"  #: any other answer than 200
    CREDENTIALS = "credentials"  #: the kubeconfig context cannot be turned into credentials
    #: the proxy (``proxy-url``, ``HTTPS_PROXY``) refused, hung, answered CONNECT with
    #: another status than 2xx, or is not usable (not an ``http://`` URL)
    PROXY = "proxy"


class ReasonClass(StrEnum):
    """The class of a failure reason: the ``class`` label of
    ``fleetwatch_cluster_probe_last_failure_reason``, and what the rules tell apart."""

    #: the API server answered and refused us, or its certificate (or ours) was not
    #: accepted: a person must fix a credential; the cluster itself may be fine
    CREDENTIALS = "credentials"
    #: no ready answer: the cluster (or the way to it) is down, as far as we can tell
    UNREACHABLE = "unreachable"


def reason_class(reason: Reason) -> ReasonClass:
    """The class of ``reason`` (DESIGN "Statuses", "Refused credentials").

    ================  ===============  =================================================
    reason            class            why
    ================  ===============  =================================================
    ``unauthorized``  ``credentials``  401 or 403: the server answered and refused us
    ``tls``           ``credentials``  TLS verification failed: the server's certificate
                                       not accepted (unknown authority, wrong name,
                                       expired) or ours refused by the server
    ``timeout``       ``unreachable``  no answer: nothing says the credential is wrong
    ``connect``       ``unreachable``  refused, reset or closed: no server to ask
    ``not_ready``     ``unreachable``  the server let us in and says it is not ready
    ``http_error``    ``unreachable``  any other answer: the server is unwell, not us
    ``credentials``   ``unreachable``  the context gave no credentials (exec plugin,
                                       unreadable file): the server was never asked,
                                       so it did not refuse anything
    ``proxy``         ``unreachable``  the proxy on the way failed
    ================  ===============  =================================================

    Only an answer of the cluster itself may be read as "our credential was refused":
    those failures fire ``FleetClusterCredentialsRejected`` at once, and
    ``fleetwatch rules --no-failure.count-rejected`` stops counting them toward OFFLINE.
    """
    return _CLASSES[reason]


_CLASSES: dict[Reason, ReasonClass] = {
    reason: ReasonClass.CREDENTIALS
    if reason in (Reason.UNAUTHORIZED, Reason.TLS)
    else ReasonClass.UNREACHABLE
    for reason in Reason
}


@dataclass(frozen=True)
class ProbeResult:
    """Outcome of one probe. ``detail`` is for logs: short, and never a credential."""

    success: bool
    reason: Reason | None
    duration: float  #: seconds, from the first byte sent to the verdict
    status: int | None = None  #: HTTP status when there was an answer
    detail: str = ""
    failed_checks: tuple[str, ...] = ()


class ClusterRequestError(Exception):
    """A request to a cluster's API server failed; ``reason`` is one of :class:`Reason`."""

    def __init__(self, reason: Reason, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.status = status


#: The statuses that say "these credentials are not accepted": the probe's and the
#: checks' reason ``unauthorized``, and a probe's cue to resolve cached credentials again.
REFUSED = frozenset({401, 403})


def ok_body(status: int, body: bytes, path: str) -> bytes:
    """The body of a 200 answer to ``GET path``; others raise :class:`ClusterRequestError`."""
    if status == 200:
        return body
    reason = Reason.UNAUTHORIZED if status in REFUSED else Reason.HTTP_ERROR
    raise ClusterRequestError(reason, f"HTTP {status} on {path}", status)


def failed_checks(body: bytes) -> tuple[str, ...]:
    """Names of the ``[-]name failed...`` lines of a verbose health body."""
    out: list[str] = []
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("[-]"):
            name = line[3:].split(" ", 1)[0]
            if name:
                out.append(name[:100])
    return tuple(out)


def verdict(status: int, body: bytes, duration: float) -> ProbeResult:
    """The probe's result for an answer of ``/readyz?verbose``: 200 is success, the rest data."""
    if status == 200:
        return ProbeResult(True, None, duration, status)
    if status in REFUSED:
        return ProbeResult(False, Reason.UNAUTHORIZED, duration, status, f"HTTP {status}")
    checks = failed_checks(body)
    if checks:
        detail = f"HTTP {status}, failed checks: {', '.join(checks)}"
        return ProbeResult(False, Reason.NOT_READY, duration, status, detail, checks)
    return ProbeResult(False, Reason.HTTP_ERROR, duration, status, f"HTTP {status}")


@dataclass(frozen=True)
class MetricFamily:
    """A family a check publishes: name, type and help, as in the text format."""

    name: str
    type: Literal["gauge", "counter"]
    help: str


@dataclass(frozen=True)
class Sample:
    """One sample of a declared family for this cluster; ``cluster`` is added for you."""

    name: str
    value: float
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetGroup:
    """One Prometheus HTTP SD group: ``{"targets": [...], "labels": {...}}``."""

    targets: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckResult:
    samples: tuple[Sample, ...] = ()
    targets: tuple[TargetGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class Unchanged:
    """A check's answer "the last result I handed for this cluster still stands".

    The exporter keeps each result only as the exposition serves it, so a check that
    would hand the same result again says so instead of keeping the result to hand it:
    per cluster it then needs to keep only what tells "unchanged" (a digest).
    ``only``: of that result, only the samples of these families (and all its target
    groups). With no result handed before, nothing is published.
    """

    only: frozenset[str] | None = None


#: The last result stands, whole.
UNCHANGED = Unchanged()


@dataclass(frozen=True)
class CycleSettings:
    """What the probe cycle runs with (from ``exporter.settings.ExporterSettings``)."""

    interval: float  #: seconds between the starts of two cycles
    timeout: float  #: seconds one cluster may take (credentials + probe), and each check
    concurrency: int  #: probes working (not waiting for an answer) at the same time
    #: idle kept-alive connections kept between cycles; None: one per cluster. OpenSSL
    #: keeps about 24 KiB per idle TLS connection, so 10,000 clusters hold 240+ MB; past
    #: the bound a probe pays a TLS handshake (about 1.6 ms of CPU) instead.
    max_idle_connections: int | None = None
