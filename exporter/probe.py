"""One probe of one API server -> a :class:`ProbeResult` with a reason from a fixed set.

A probe is ``GET /readyz?verbose`` with the context's own credentials. Success is HTTP
200; anything else is data: one :class:`Reason`, and for ``not_ready`` the checks the
server reports as failed (``[-]etcd failed: reason withheld``).

Requests share the exporter's one :class:`exporter.http11.HttpPool` so connections stay
alive between cycles (pooled per endpoint, SSL context and server name). A kept-alive
connection that the server closed meanwhile is retried once on a fresh connection, never
on a timeout or a refused connection (as aiohttp does for idempotent requests);
``test_dead_keepalive_connection_is_retried_once`` holds it to it. The pool is a lean
client of our own rather than aiohttp's: at 10,000 clusters the probe client is most of the
exporter's CPU (see ``exporter/http11.py``).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import aiohttp

from exporter.credentials import Credentials
from exporter.http11 import Failure, HttpError, HttpPool

#: Most of a ``/readyz?verbose`` body we read (a real one is about 2 KB).
READYZ_MAX_BYTES = 64 * 1024
#: Most of a JSON answer ``ApiClient.get_json`` reads (kube-system pod lists of big clusters).
JSON_MAX_BYTES = 32 * 1024 * 1024


#: Read buffer of each TLS connection. asyncio allocates ``SSLProtocol.max_size`` (256 KiB)
#: per connection; with one kept-alive connection per cluster that is 2.5 GB for 10,000
#: clusters. A TLS record is at most 16 KiB, so 32 KiB loses nothing (measured: 1,000
#: clusters, RSS 386 -> 166 MiB, steady cycle as fast).
TLS_READ_BUFFER_BYTES = 32 * 1024


def limit_tls_read_buffers(size: int = TLS_READ_BUFFER_BYTES) -> None:
    """Lower asyncio's per-connection TLS read buffer for this process (idempotent)."""
    from asyncio import sslproto

    if getattr(sslproto.SSLProtocol, "max_size", 0) > size:
        sslproto.SSLProtocol.max_size = size


class Reason(StrEnum):
    """Why a probe failed: the ``reason`` label of ``fleetwatch_cluster_probe_failures_total``."""

    TIMEOUT = "timeout"  #: no complete answer within --probe.timeout
    CONNECT = "connect"  #: connection refused, reset, or closed before an answer
    TLS = "tls"  #: TLS handshake failed (unknown CA, wrong name, refused client cert)
    UNAUTHORIZED = "unauthorized"  #: 401 or 403: the credentials are not accepted
    NOT_READY = "not_ready"  #: the server answered and lists failed checks ([-] lines)
    HTTP_ERROR = "http_error"  #: any other answer than 200
    CREDENTIALS = "credentials"  #: the kubeconfig context cannot be turned into credentials


@dataclass(frozen=True)
class ProbeResult:
    """Outcome of one probe. ``detail`` is for logs: short, and never a credential."""

    success: bool
    reason: Reason | None
    duration: float  #: seconds, from the first byte sent to the verdict
    status: int | None = None  #: HTTP status when there was an answer
    detail: str = ""
    failed_checks: tuple[str, ...] = ()


class ApiError(Exception):
    """A request to an API server failed; ``reason`` is one of :class:`Reason`."""

    def __init__(self, reason: Reason, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.status = status


Gate = Callable[[], AbstractAsyncContextManager[object]]


class ApiClient:
    """Authenticated GETs to one API server, over the exporter's shared connection pool.

    This is the seam other per-cluster checks use (``exporter/etcd.py``,
    ``exporter/controlplane.py``): same connections, TLS context and headers as the probe.
    ``session`` is the exporter's aiohttp session, for checks that call other servers
    (direct etcd) with their own ``ssl=``.
    """

    __slots__ = ("credentials", "endpoint", "http", "session")

    def __init__(
        self,
        http: HttpPool,
        session: aiohttp.ClientSession,
        endpoint: str,
        credentials: Credentials,
    ) -> None:
        self.http = http
        self.session = session
        self.endpoint = endpoint.rstrip("/")
        self.credentials = credentials

    async def get(
        self,
        path: str,
        timeout: float,  # noqa: ASYNC109 - the request's own bound, as aiohttp's ClientTimeout
        max_bytes: int = JSON_MAX_BYTES,
        gate: Gate | None = None,
    ) -> tuple[int, bytes]:
        """``(status, body)`` of ``GET endpoint+path``; :class:`ApiError` when no answer.

        ``gate`` (the cycle's concurrency slot) is held while connecting and sending only.
        """
        creds = self.credentials
        try:
            async with asyncio.timeout(timeout):
                return await self.http.get(
                    self.endpoint,
                    path,
                    headers=creds.headers,
                    context=creds.ssl_context,
                    server_hostname=creds.server_hostname,
                    max_bytes=max_bytes,
                    gate=gate,
                )
        except Exception as exc:  # every failure becomes a reason; nothing escapes as a crash
            reason, detail = classify_error(exc)
            raise ApiError(reason, detail) from None

    async def get_json(self, path: str, timeout: float) -> Any:  # noqa: ASYNC109 - as get()
        """Decoded JSON of a 200 answer; any other status or bad JSON raises :class:`ApiError`."""
        status, body = await self.get(path, timeout)
        if status in (401, 403):
            raise ApiError(Reason.UNAUTHORIZED, f"HTTP {status} on {path}", status)
        if status != 200:
            raise ApiError(Reason.HTTP_ERROR, f"HTTP {status} on {path}", status)
        try:
            return json.loads(body)
        except ValueError:
            raise ApiError(Reason.HTTP_ERROR, f"invalid JSON on {path}", status) from None


_FAILURE_REASONS = {
    Failure.CONNECT: Reason.CONNECT,
    Failure.TLS: Reason.TLS,
    Failure.PROTOCOL: Reason.HTTP_ERROR,
    Failure.URL: Reason.CONNECT,
}


def classify_error(exc: BaseException) -> tuple[Reason, str]:
    """Map a client exception to a reason and a short detail without secrets."""
    if isinstance(exc, HttpError):
        return _FAILURE_REASONS[exc.failure], exc.detail
    if isinstance(exc, TimeoutError):  # includes aiohttp's ServerTimeoutError
        return Reason.TIMEOUT, "no answer in time"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return Reason.TLS, f"certificate not accepted: {_short(exc.certificate_error)}"
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError) or isinstance(
        exc.__cause__, ssl.SSLError
    ):
        return Reason.TLS, f"TLS error: {_short(exc)}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Reason.CONNECT, f"cannot connect: {_short(exc.os_error)}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return Reason.CONNECT, "server closed the connection before answering"
    if isinstance(exc, aiohttp.ClientOSError):
        if "SSL" in str(exc) or "TLS" in str(exc):
            return Reason.TLS, f"TLS error: {_short(exc)}"
        return Reason.CONNECT, f"connection error: {_short(exc)}"
    if isinstance(exc, aiohttp.InvalidURL):
        return Reason.CONNECT, "the endpoint is not a valid URL"
    if isinstance(exc, aiohttp.ClientError):
        return Reason.HTTP_ERROR, f"{type(exc).__name__}"
    return Reason.HTTP_ERROR, f"unexpected {type(exc).__name__}"


def _short(value: object, limit: int = 160) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failed_checks(body: bytes) -> tuple[str, ...]:
    """Names of the ``[-]name failed...`` lines of a verbose health body."""
    out: list[str] = []
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("[-]"):
            name = line[3:].split(" ", 1)[0]
            if name:
                out.append(name[:100])
    return tuple(out)


async def probe(
    api: ApiClient,
    timeout: float,  # noqa: ASYNC109 - as get()
    gate: Gate | None = None,
) -> ProbeResult:
    """Probe ``/readyz?verbose`` once; never raises for a failure of the cluster."""
    start = time.perf_counter()
    try:
        status, body = await api.get("/readyz?verbose", timeout, READYZ_MAX_BYTES, gate)
    except ApiError as exc:
        return ProbeResult(False, exc.reason, time.perf_counter() - start, None, exc.detail)
    duration = time.perf_counter() - start
    if status == 200:
        return ProbeResult(True, None, duration, status)
    if status in (401, 403):
        return ProbeResult(False, Reason.UNAUTHORIZED, duration, status, f"HTTP {status}")
    checks = failed_checks(body)
    if checks:
        detail = f"HTTP {status}, failed checks: {', '.join(checks)}"
        return ProbeResult(False, Reason.NOT_READY, duration, status, detail, checks)
    return ProbeResult(False, Reason.HTTP_ERROR, duration, status, f"HTTP {status}")
