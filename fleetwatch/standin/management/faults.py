"""Faults a test arms through the control API, and the request counts it reads back.

A fault matches requests by verb and resource (either may be left out: any) and lasts for
the next ``count`` matching requests, or for ``seconds``, or until cleared:

- ``error``: answered with ``status`` (500 by default) and the real ``Status`` body, or
  with the ``reason`` and ``message`` given (an admission policy's refusal: 403
  ``Forbidden``, ``ValidatingAdmissionPolicy '...' with binding '...' denied request: ...``);
- ``throttle``: 429 ``TooManyRequests`` with ``Retry-After``, as priority and fairness sends;
- ``hang``: never answered, until the fault is cleared or the server stops;
- ``delay``: answered normally after ``delay_seconds`` (a slow list, for readiness tests);
- a watch that opens (200) and breaks at once, for clients that must back off:
  ``watch_error``, one ``ERROR`` event holding ``status``'s ``Status`` (410 ``Expired`` by
  default, as the watch cache answers a compacted revision); ``watch_close``, the stream
  ended with no event; ``watch_garbage``, one line that is not JSON (a proxy's error page).
  These match watches only (``verb`` is ``watch``, given or not).

Counts are by ``"<verb> <resource>"`` (``"list secrets"``, ``"patch
kustomizations.kustomize.toolkit.fluxcd.io"``), so a test can assert that a dry run sent
no write. They count every request that reached the API, faulted or not.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: faults answered by a watch stream that breaks at once (``watch.serve_broken_watch``)
WATCH_FAULTS = ("watch_error", "watch_close", "watch_garbage")
FAULT_KINDS = ("error", "throttle", "hang", "delay", *WATCH_FAULTS)
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass
class ArmedFault:
    kind: str
    verb: str | None = None
    resource: str | None = None
    count: int | None = None
    until: float | None = None
    status: int = 500
    retry_after: int = 1
    delay_seconds: float = 0.0
    #: The ``Status`` reason and message of an ``error`` (None: the status code's own).
    reason: str | None = None
    message: str | None = None

    def matches(self, verb: str, resource: str) -> bool:
        return (self.verb in (None, verb)) and (self.resource in (None, resource))

    def active(self) -> bool:
        if self.count is not None and self.count <= 0:
            return False
        return self.until is None or time.monotonic() < self.until

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "verb": self.verb, "resource": self.resource}
        if self.count is not None:
            out["remaining"] = self.count
        if self.until is not None:
            out["seconds_left"] = round(max(0.0, self.until - time.monotonic()), 3)
        return out


def parse_fault(body: Any) -> ArmedFault:
    """A fault from the control API's JSON; ``ValueError`` with the reason when it is wrong."""
    if not isinstance(body, dict):
        raise ValueError('body must be a JSON object like {"kind": "error", "count": 2}')
    known = {
        "kind",
        "verb",
        "resource",
        "count",
        "seconds",
        "status",
        "retry_after",
        "delay_seconds",
        "reason",
        "message",
    }
    unknown = sorted(set(body) - known)
    if unknown:
        raise ValueError(f"unknown fields {unknown}; known: {sorted(known)}")
    kind = body.get("kind")
    if kind not in FAULT_KINDS:
        raise ValueError(f"kind must be one of {list(FAULT_KINDS)}")
    count, seconds = body.get("count"), body.get("seconds")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise ValueError("count must be a positive integer")
    if seconds is not None and (not isinstance(seconds, int | float) or seconds <= 0):
        raise ValueError("seconds must be a positive number")
    for name in ("verb", "resource", "reason", "message"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise ValueError(f"{name} must be a string")
    verb = body.get("verb")
    if kind in WATCH_FAULTS:
        if verb not in (None, "watch"):
            raise ValueError(f"a {kind} fault breaks watches: verb must be watch or unset")
        verb = "watch"
    default_status = 429 if kind == "throttle" else 410 if kind == "watch_error" else 500
    status = body.get("status", default_status)
    if not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError("status must be an HTTP error code")
    delay = body.get("delay_seconds", 0.0)
    if kind == "delay" and (not isinstance(delay, int | float) or delay <= 0):
        raise ValueError("a delay fault needs delay_seconds > 0")
    return ArmedFault(
        kind,
        verb,
        body.get("resource"),
        count,
        time.monotonic() + seconds if seconds is not None else None,
        status,
        int(body.get("retry_after", 1)),
        float(delay),
        body.get("reason"),
        body.get("message"),
    )


@dataclass
class Faults:
    """The armed faults and the request counts of one server."""

    faults: list[ArmedFault] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    #: Set when hung requests must give up (faults cleared, server stopping).
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def count(self, verb: str, resource: str) -> None:
        self.counts[f"{verb} {resource}"] += 1

    def take(self, verb: str, resource: str) -> ArmedFault | None:
        """The first active fault matching this request (its count used up by one)."""
        self.faults = [f for f in self.faults if f.active()]
        for fault in self.faults:
            if fault.matches(verb, resource):
                if fault.count is not None:
                    fault.count -= 1
                return fault
        return None

    def arm(self, fault: ArmedFault) -> None:
        if self.release.is_set():
            self.release = asyncio.Event()
        self.faults.append(fault)

    def clear(self) -> None:
        self.faults.clear()
        self.release.set()

    def writes(self) -> int:
        return sum(n for key, n in self.counts.items() if key.split(" ")[0] in WRITE_VERBS)
