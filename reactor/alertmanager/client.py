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

Only fleetwatch's status alerts are asked for (``filter``, as amtool sends it), so a busy
Alertmanager's other alerts are not read. A listing bigger than the bound
(``--alertmanager.max-listing-bytes``) is not read at all: a counted failure that says so.
One that fits is parsed and read off the event loop, entry by entry, so the GIL is handed
back between entries and the API keeps answering while tens of megabytes are read (one
``json.loads`` of the whole body would hold it throughout: 0.6 s for 40 MB here).

Credentials come from ``--alertmanager.http-config.file`` (``reactor.alertmanager.http``)
or from the URL (``http://user:password@host:9093``, sent as basic auth): they never appear
in a log line, an error or a metric label, which name the Alertmanager by ``host:port``
only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
from yarl import URL

from reactor.alertmanager.http import (
    DEFAULT_MAX_LISTING_BYTES,
    AlertmanagerAuth,
    HTTPConfigError,
)
from reactor.alertmanager.signals import PayloadError, is_name, parse_time
from reactor.statemachine import StatusAlert

#: Bodies are read in pieces of this size, so a listing over the bound stops early.
READ_CHUNK_BYTES = 256 * 1024


class AlertmanagerError(RuntimeError):
    """An Alertmanager did not answer usefully; the message is safe to log (no credentials)."""


@dataclass(frozen=True, slots=True)
class ListedAlert:
    """One alert as ``GET /api/v2/alerts`` lists it."""

    labels: Mapping[str, str]
    starts_at: int  #: microseconds since the epoch
    #: muted by a silence or an inhibition (state ``suppressed``), or not yet processed
    suppressed: bool
    annotations: Mapping[str, str] | None = None
    inhibited: bool = False  #: ``status.inhibitedBy`` names an alert (the storm guard)
    silenced: bool = False  #: ``status.silencedBy`` names a silence


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
    """Reads one Alertmanager through ``session``, each request within ``timeout_s``.

    ``auth``: credentials from ``--alertmanager.http-config.file`` (the URL's own, if it
    has some, otherwise); ``max_bytes``: the bound of one listing.
    """

    def __init__(
        self,
        url: str,
        session: aiohttp.ClientSession,
        timeout_s: float,
        *,
        auth: AlertmanagerAuth | None = None,
        max_bytes: int = DEFAULT_MAX_LISTING_BYTES,
    ) -> None:
        self.name = display_name(url)
        base = URL(url)
        self._basic: str | None = None
        if base.user is not None:
            pair = f"{base.user}:{base.password or ''}".encode()
            self._basic = "Basic " + base64.b64encode(pair).decode("ascii")
        self._auth = auth
        self._base = base.with_user(None).with_password(None)
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.max_bytes = max_bytes

    async def listing(self) -> Listing:
        """The alerts it lists (silenced and inhibited included), then since when it runs."""
        body = await self._get(
            "api/v2/alerts", filter=STATUS_FILTER, active="true", silenced="true", inhibited="true"
        )
        status = await self._get("api/v2/status")
        listing = await asyncio.to_thread(read_listing, body, 0)
        raw_status = _json(status, "api/v2/status")
        if not isinstance(raw_status, dict):
            raise AlertmanagerError("/api/v2/status did not answer a JSON object")
        try:
            started_at = parse_time(raw_status.get("uptime"), "uptime")
        except PayloadError as exc:
            raise AlertmanagerError(f"/api/v2/status: {exc}") from None
        if started_at is None:
            raise AlertmanagerError("/api/v2/status: uptime is the zero time")
        return replace(listing, started_at=started_at)

    def _headers(self) -> dict[str, str]:
        if self._auth is not None:
            try:
                return {"Authorization": self._auth.header()}
            except HTTPConfigError as exc:
                raise AlertmanagerError(f"--alertmanager.http-config.file {exc}") from None
        return {} if self._basic is None else {"Authorization": self._basic}

    async def _get(self, path: str, **query: str) -> bytes:
        url = (self._base / path).with_query(query) if query else self._base / path
        headers = self._headers()
        try:
            async with self._session.get(url, headers=headers, timeout=self._timeout) as resp:
                if resp.status != 200:
                    raise AlertmanagerError(f"/{path} answered HTTP {resp.status}")
                return await self._read(resp, path)
        except TimeoutError:
            raise AlertmanagerError(f"/{path}: no answer within {self._timeout.total:g}s") from None
        except aiohttp.ClientError as exc:
            # Connection errors name host and port only; the URL (and its credentials) stays out.
            reason = str(exc) if isinstance(exc, aiohttp.ClientConnectionError) else ""
            raise AlertmanagerError(f"/{path}: {type(exc).__name__} {reason}".rstrip()) from None

    async def _read(self, resp: aiohttp.ClientResponse, path: str) -> bytes:
        """The body, unless it is bigger than the bound: then not read to its end."""
        too_big = AlertmanagerError(
            f"/{path}: the answer is larger than {self.max_bytes} bytes, not read "
            "(--alertmanager.max-listing-bytes)"
        )
        if resp.content_length is not None and resp.content_length > self.max_bytes:
            raise too_big
        body = bytearray()
        async for chunk in resp.content.iter_chunked(READ_CHUNK_BYTES):
            body += chunk
            if len(body) > self.max_bytes:
                raise too_big
        return bytes(body)


#: ``filter`` of ``GET /api/v2/alerts``: the status alerts only (Alertmanager's matchers).
STATUS_FILTER = 'alertname=~"{}"'.format("|".join(sorted(kind.value for kind in StatusAlert)))


def read_listing(body: bytes, started_at: int) -> Listing:
    """A listing from the body of ``GET /api/v2/alerts``. Blocking and long for a big
    body: run it off the event loop (it hands the GIL back between entries)."""
    alerts: list[ListedAlert] = []
    unreadable = 0
    unreadable_for: set[str] = set()
    unreadable_unknown = False
    for raw in json_array(body, "api/v2/alerts"):
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


_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, at: int) -> int:
    """Past the JSON whitespace at ``at``."""
    found = _SPACE.match(text, at)
    return at if found is None else found.end()


def json_array(body: bytes, path: str) -> Iterator[Any]:
    """The elements of a JSON array, decoded one at a time (each a short C call)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise AlertmanagerError(f"/{path} did not answer JSON") from None
    at = _skip(text, 0)
    if not text.startswith("[", at):
        _json(body, path)  # JSON, but no array? Or no JSON at all?
        raise AlertmanagerError(f"/{path} did not answer a JSON array")
    decoder = json.JSONDecoder()
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        at += 1
    else:
        while True:
            try:
                value, at = decoder.raw_decode(text, at)
            except (ValueError, RecursionError):
                raise AlertmanagerError(f"/{path} did not answer JSON") from None
            yield value
            at = _skip(text, at)
            if text.startswith(",", at):
                at = _skip(text, at + 1)
            elif text.startswith("]", at):
                at += 1
                break
            else:
                raise AlertmanagerError(f"/{path} did not answer JSON")
    if _skip(text, at) != len(text):
        raise AlertmanagerError(f"/{path} did not answer JSON")


def _json(body: bytes, path: str) -> Any:
    try:
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
    if not isinstance(status, dict):
        status = {}
    notes = raw.get("annotations")
    if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
        notes = None
    return ListedAlert(
        labels,
        starts_at,
        suppressed=status.get("state") != "active",
        annotations=notes,
        inhibited=bool(status.get("inhibitedBy")),
        silenced=bool(status.get("silencedBy")),
    )


#: The status alerts' names (``fleetwatch.common.contract.StatusAlert``), as listed.
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
