"""The direct etcd client: ask each member how it is, over the etcd checks' own session.

Used when the config file gives a cluster's etcd client URLs (``exporter.configfile``): per
member ``GET /health``, ``POST /v3/maintenance/status`` and ``POST /v3/cluster/member/list``
(answers made sense of by ``exporter.controlplane.etcd_json``, the quorum by
``exporter.controlplane.quorum``). etcd is a handful of servers per configured cluster, not
the fleet, so aiohttp serves it: :class:`EtcdClient` owns one session, opened on first use
and closed with the check that holds it. The API servers' client is ``exporter.net.pool``.

The TLS context of a cluster's etcd is rebuilt only when its CA, certificate or key file
changes (:func:`load_tls`), so a rotated client certificate is picked up without a restart.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from exporter.configfile import EtcdConfig
from exporter.controlplane.etcd_json import (
    EndpointAnswer,
    health_true,
    match_members,
    parse_listing,
    parse_status,
    report_from_endpoints,
    report_from_listing,
)
from exporter.controlplane.quorum import EtcdReport

#: One /health try needs its ~1 s block plus margin; a member that answers but reports
#: unhealthy is asked again while at least this much of the budget is left.
_HEALTH_TRY_SECONDS = 1.5


class EtcdClient:
    """The direct etcd checks' HTTP session: one for the exporter's life, kept-alive.

    No connection limit: the cycle's concurrency already bounds how many checks run.
    """

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def report(self, config: EtcdConfig, ssl_context: ssl.SSLContext | None) -> EtcdReport:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=3600)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return await probe_etcd(self._session, config, ssl_context)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def probe_etcd(
    session: aiohttp.ClientSession,
    config: EtcdConfig,
    ssl_context: ssl.SSLContext | None = None,
) -> EtcdReport:
    """Ask every configured member, and every listed member not configured, how it is.

    Never raises for an unreachable or broken member: that member is unhealthy. A healthy
    cluster answers in milliseconds; the whole call never takes much longer than
    ``config.timeout_seconds``, its budget.

    A member that answers but reports unhealthy is asked again until the budget runs out:
    a leader election makes /health answer 503 (a new leader in about 1.3 s, more on a
    loaded machine), and the exporter holds each reading for a whole probe cycle, so one
    election must not read as "quorum lost" for five minutes.
    """
    deadline = time.monotonic() + config.timeout_seconds
    answers = await asyncio.gather(
        *(_ask(session, url, deadline, ssl_context) for url in config.endpoints)
    )
    listing = next((a.listing for a in answers if a.listing is not None), None)
    if listing is None:
        return report_from_endpoints(answers)
    matched = match_members(listing, answers)
    missing = [m for m in listing if m.member_id not in matched and m.client_urls]
    if missing:
        extra = await asyncio.gather(
            *(_ask(session, m.client_urls[0], deadline, ssl_context) for m in missing)
        )
        for listed, answer in zip(missing, extra, strict=True):
            matched[listed.member_id] = answer
    return report_from_listing(listing, matched)


async def _ask(
    session: aiohttp.ClientSession,
    url: str,
    deadline: float,
    ssl_context: ssl.SSLContext | None,
) -> EndpointAnswer:
    """health, status and member list of one member, all within ``deadline`` (monotonic)."""
    ssl_arg: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return EndpointAnswer(url=url, healthy=False, status=None, listing=None)
    timeout = aiohttp.ClientTimeout(total=remaining)
    health, status, listing = await asyncio.gather(
        _request(session, "GET", f"{url}/health", timeout, ssl_arg),
        _request(session, "POST", f"{url}/v3/maintenance/status", timeout, ssl_arg),
        _request(session, "POST", f"{url}/v3/cluster/member/list", timeout, ssl_arg),
    )
    healthy = health is not None and health[0] == 200 and health_true(health[1])
    while not healthy and status is not None:
        # Up but not healthy: maybe an election. /health blocks ~1 s per try while there
        # is no leader, which paces this loop; the pause only guards against fast 503s.
        await asyncio.sleep(0.1)
        remaining = deadline - time.monotonic()
        if remaining < _HEALTH_TRY_SECONDS:
            break
        try_timeout = aiohttp.ClientTimeout(total=_HEALTH_TRY_SECONDS)
        health = await _request(session, "GET", f"{url}/health", try_timeout, ssl_arg)
        healthy = health is not None and health[0] == 200 and health_true(health[1])
    return EndpointAnswer(
        url=url,
        healthy=healthy,
        status=parse_status(status[1]) if status is not None and status[0] == 200 else None,
        listing=parse_listing(listing[1]) if listing is not None and listing[0] == 200 else None,
    )


async def _request(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    client_timeout: aiohttp.ClientTimeout,
    ssl_arg: ssl.SSLContext | bool,
) -> tuple[int, Any] | None:
    """(status, parsed JSON or None), or None when the member could not be asked at all."""
    body = b"{}" if method == "POST" else None
    try:
        async with session.request(
            method, url, data=body, timeout=client_timeout, ssl=ssl_arg, allow_redirects=False
        ) as resp:
            raw = await resp.read()
            try:
                parsed: Any = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            return resp.status, parsed
    except (aiohttp.ClientError, TimeoutError, OSError, ssl.SSLError):
        return None


# --- TLS -------------------------------------------------------------------------------------


def build_ssl_context(config: EtcdConfig) -> ssl.SSLContext | None:
    """TLS context from the config's CA and client pair; None for plain-http endpoints.

    Reads files: call it off the event loop (``asyncio.to_thread``), once per config.
    """
    if not config.endpoints or urlsplit(config.endpoints[0]).scheme != "https":
        return None
    context = ssl.create_default_context(
        cafile=str(config.ca_file) if config.ca_file is not None else None
    )
    if config.cert_file is not None and config.key_file is not None:
        context.load_cert_chain(str(config.cert_file), str(config.key_file))
    return context


@dataclass(frozen=True)
class TlsState:
    """The TLS context of one cluster's etcd, and the file stamps it was built from."""

    stamp: tuple[tuple[int, int] | None, ...]
    context: ssl.SSLContext | None
    error: str | None = None
    """Exception type name when the files could not be loaded."""


def _stamp(config: EtcdConfig) -> tuple[tuple[int, int] | None, ...]:
    stamps: list[tuple[int, int] | None] = []
    for path in (config.ca_file, config.cert_file, config.key_file):
        if path is None:
            stamps.append(None)
            continue
        try:
            st = path.stat()
            stamps.append((st.st_mtime_ns, st.st_size))
        except OSError:
            stamps.append((-1, -1))
    return tuple(stamps)


def load_tls(config: EtcdConfig, previous: TlsState | None) -> TlsState:
    """``previous`` while the CA/certificate/key files are unchanged, else a fresh context.

    Blocking (stat, file reads): run it in a thread. Rebuilding on change picks up a
    rotated client certificate without a restart, and a fixed file after a broken one.
    """
    stamp = _stamp(config)
    if previous is not None and previous.stamp == stamp:
        return previous
    try:
        return TlsState(stamp=stamp, context=build_ssl_context(config))
    except (OSError, ssl.SSLError, ValueError) as exc:
        return TlsState(stamp=stamp, context=None, error=type(exc).__name__)
