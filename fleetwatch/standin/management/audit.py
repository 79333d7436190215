"""The writes the management cluster answered, and who sent them: an audit log, as
kube-apiserver keeps one (``user.username``, ``userAgent``, ``verb``, ``objectRef``,
``responseStatus.code``, ``requestReceivedTimestamp``).

A test of several clients holding one credential each (two reactor replicas, each its own
token) reads from it which client's write landed, and when it was received. Only writes
(create, update, patch, delete): the reads and watches of a running client would bury
them. Bounded: the last :data:`MAX_EVENTS`, the oldest dropped first.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from fleetwatch.standin.management.faults import WRITE_VERBS

MAX_EVENTS = 100_000


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One write, as answered."""

    #: when the request reached the handler (Unix time, the server's clock)
    received: float
    #: the token's user; "" when none was recognised (the answer was 401)
    user: str
    user_agent: str
    verb: str
    #: the resource's key: ``kustomizations.kustomize.toolkit.fluxcd.io``, ``leases...``
    resource: str
    namespace: str
    name: str
    #: the HTTP status answered (2xx: the write took effect)
    code: int

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AuditLog:
    events: deque[AuditEvent] = field(default_factory=lambda: deque(maxlen=MAX_EVENTS))

    def record(self, event: AuditEvent) -> None:
        if event.verb in WRITE_VERBS:
            self.events.append(event)

    def as_json(self) -> list[dict[str, Any]]:
        return [event.as_json() for event in self.events]
