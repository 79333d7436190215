"""Alertmanager's API v2, as the reconciliation reads it: which alerts it lists, since when it runs.

Two calls per Alertmanager and reconciliation: ``GET /api/v2/alerts`` (every alert it holds
that has not resolved, whether notified, silenced or inhibited, each with its ``status.state``:
``active``, or ``suppressed`` when a silence or an inhibition mutes it) and ``GET
/api/v2/status`` (``uptime`` is the moment it started). The alerts are read first: if the
Alertmanager restarts between the two calls, the status shows the later start and the
listing is treated as the young one it may be.

An entry of the listing that cannot be read (a ``startsAt`` that is no time, labels that
are not strings) is not an alert the reactor may take as gone: the listing says which
clusters such entries name (:attr:`Listing.unreadable_for`), or that one may name any
(:attr:`Listing.unreadable_unknown`), and reconciliation resolves nothing there.

A URL may carry credentials (``http://user:password@host:9093``, sent as basic auth): they
never appear in a log line, an error or a metric label, which name the Alertmanager by
``host:port`` only.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from reactor.signals import PayloadError, is_name, parse_time
from reactor.statemachine import StatusAlert

#: Responses bigger than this are parsed off the event loop (10,000 alerts are ~4 MB).
PARSE_OFF_LOOP_BYTES = 64 * 1024


class AlertmanagerError(RuntimeError):
    """An Alertmanager did not answer usefully; the message is safe to log (no credentials)."""


@dataclass(frozen=True, slots=True)
class ListedAlert:
    """One alert as ``GET /api/v2/alerts`` lists it."""

    labels: Mapping[str, str]
    starts_at: int  #: microseconds since the epoch
    #: muted by a silence or an inhibition (state ``suppressed``), or not yet processed
    suppressed: bool


@dataclass(frozen=True, slots=True)
class Listing:
    """What one Alertmanager said in one reconciliation."""

    alerts: tuple[ListedAlert, ...]
    started_at: int  #: microseconds since the epoch (``uptime`` of ``/api/v2/status``)
    #: alerts of the listing that could not be read (no labels, a bad ``startsAt``...)
    unreadable: int = 0
    #: clusters named by a status alert that could not be read: this listing may hold any
    #: of their alerts
    unreadable_for: frozenset[str] = frozenset()
    #: an entry whose labels could not be read: it may be any cluster's status alert
    unreadable_unknown: bool = False


def display_name(url: str) -> str:
    """``host:port`` of an Alertmanager URL: its name in logs and metric labels."""
    parsed = URL(url)
    host = parsed.host or "?"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parsed.port}" if parsed.port is not None else host


class AlertmanagerClient:
    """Reads one Alertmanager through ``session``, each request within ``timeout_s``."""

    def __init__(self, url: str, session: aiohttp.ClientSession, timeout_s: float) -> None:
        self.name = display_name(url)
        base = URL(url)
        self._headers: dict[str, str] = {}
        if base.user is not None:
            pair = f"{base.user}:{base.password or ''}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        self._base = base.with_user(None).with_password(None)
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def listing(self) -> Listing:
        """The alerts it lists (silenced and inhibited included), then since when it runs."""
        raw_alerts = await self._get(
            "api/v2/alerts", active="true", silenced="true", inhibited="true"
        )
        raw_status = await self._get("api/v2/status")
        if not isinstance(raw_alerts, list):
            raise AlertmanagerError("/api/v2/alerts did not answer a JSON array")
        if not isinstance(raw_status, dict):
            raise AlertmanagerError("/api/v2/status did not answer a JSON object")
        try:
            started_at = parse_time(raw_status.get("uptime"), "uptime")
        except PayloadError as exc:
            raise AlertmanagerError(f"/api/v2/status: {exc}") from None
        if started_at is None:
            raise AlertmanagerError("/api/v2/status: uptime is the zero time")
        alerts: list[ListedAlert] = []
        unreadable = 0
        unreadable_for: set[str] = set()
        unreadable_unknown = False
        for raw in raw_alerts:
            alert = read_alert(raw)
            if alert is not None:
                alerts.append(alert)
                continue
            unreadable += 1
            cluster = unreadable_cluster(raw)
            if cluster is not None:
                unreadable_for.add(cluster)
            elif _labels(raw) is None:
                unreadable_unknown = True
        return Listing(
            tuple(alerts), started_at, unreadable, frozenset(unreadable_for), unreadable_unknown
        )

    async def _get(self, path: str, **query: str) -> Any:
        url = (self._base / path).with_query(query) if query else self._base / path
        try:
            async with self._session.get(url, headers=self._headers, timeout=self._timeout) as resp:
                if resp.status != 200:
                    raise AlertmanagerError(f"/{path} answered HTTP {resp.status}")
                body = await resp.read()
        except TimeoutError:
            raise AlertmanagerError(f"/{path}: no answer within {self._timeout.total:g}s") from None
        except aiohttp.ClientError as exc:
            # Connection errors name host and port only; the URL (and its credentials) stays out.
            reason = str(exc) if isinstance(exc, aiohttp.ClientConnectionError) else ""
            raise AlertmanagerError(f"/{path}: {type(exc).__name__} {reason}".rstrip()) from None
        try:
            if len(body) > PARSE_OFF_LOOP_BYTES:
                return await asyncio.to_thread(json.loads, body)
            return json.loads(body)
        except (ValueError, RecursionError):
            raise AlertmanagerError(f"/{path} did not answer JSON") from None


def read_alert(raw: Any) -> ListedAlert | None:
    """One element of ``GET /api/v2/alerts``; None when it cannot be used."""
    labels = _labels(raw)
    if labels is None:
        return None
    try:
        starts_at = parse_time(raw.get("startsAt"), "startsAt")
    except PayloadError:
        return None
    if starts_at is None:
        return None
    status = raw.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    return ListedAlert(labels=labels, starts_at=starts_at, suppressed=state != "active")


#: The status alerts' names (``common.contract.StatusAlert``), as listed.
STATUS_ALERT_NAMES = frozenset(kind.value for kind in StatusAlert)


def unreadable_cluster(raw: Any) -> str | None:
    """The cluster an entry :func:`read_alert` could not use names, when it is a status
    alert with a usable ``cluster`` label; None otherwise (no status alert, or no telling)."""
    labels = _labels(raw)
    if labels is None or labels.get("alertname") not in STATUS_ALERT_NAMES:
        return None
    cluster = labels.get("cluster", "")
    return cluster if is_name(cluster) else None


def _labels(raw: Any) -> dict[str, str] | None:
    """The labels of an entry, when it is an object whose labels are all strings."""
    if not isinstance(raw, dict):
        return None
    labels = raw.get("labels")
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        return None
    return labels
