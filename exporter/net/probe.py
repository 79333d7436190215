"""One probe of one API server -> a :class:`~exporter.model.ProbeResult`, and the API client.

A probe is ``GET /readyz?verbose`` with the context's own credentials; the answer becomes a
result by :func:`exporter.model.verdict` (200 is success, anything else is data with one
reason). :class:`ApiClient` is the seam every per-cluster check uses too: authenticated
GETs over the exporter's one :class:`exporter.net.pool.HttpPool`, so connections stay
alive between cycles (pooled per endpoint, SSL context and server name). A kept-alive
connection that the server closed meanwhile is retried once on a fresh connection, never
on a timeout or a refused connection; ``test_dead_keepalive_connection_is_retried_once``
holds it to it.

Behind a proxy (the cluster's ``proxy-url``, or ``HTTPS_PROXY``), every request of the
client goes through it; a proxy that refuses, fails or hangs is the reason ``proxy``,
not the API server's ``connect`` or ``timeout``: the operator then looks at the proxy.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from exporter.model import ClusterRequestError, ProbeResult, Reason, ok_body, verdict
from exporter.net.credentials import Credentials
from exporter.net.http1 import Failure, HttpError
from exporter.net.pool import HttpPool, Progress
from exporter.net.proxy import Proxy

#: Most of a ``/readyz?verbose`` body we read (a real one is about 2 KB).
READYZ_MAX_BYTES = 64 * 1024
#: Most of a JSON answer ``ApiClient.get_json`` reads (kube-system pod lists of big clusters).
JSON_MAX_BYTES = 32 * 1024 * 1024

Gate = Callable[[], AbstractAsyncContextManager[object]]


class ApiClient:
    """Authenticated GETs to one API server, over the exporter's shared connection pool.

    Checks (``exporter.controlplane.check``) use the same connections, TLS context, headers
    and proxy as the probe.
    """

    __slots__ = ("credentials", "endpoint", "http", "proxy")

    def __init__(
        self, http: HttpPool, endpoint: str, credentials: Credentials, proxy: Proxy | None = None
    ) -> None:
        self.http = http
        self.endpoint = endpoint.rstrip("/")
        self.credentials = credentials
        self.proxy = proxy  #: every request tunnels through it (None: direct)

    async def get(
        self,
        path: str,
        timeout: float,  # noqa: ASYNC109 - the request's own bound
        max_bytes: int = JSON_MAX_BYTES,
        gate: Gate | None = None,
    ) -> tuple[int, bytes]:
        """``(status, body)`` of ``GET endpoint+path``; none: :class:`ClusterRequestError`.

        ``gate`` (the cycle's concurrency slot) is held while connecting and sending only.
        """
        creds = self.credentials
        progress = Progress()
        try:
            # The pool's own deadline, not asyncio.timeout: one shared timer for every
            # request in flight instead of a timer and a context per request.
            return await self.http.get(
                self.endpoint,
                path,
                headers=creds.headers,
                context=creds.ssl_context,
                server_hostname=creds.server_hostname,
                max_bytes=max_bytes,
                gate=gate,
                proxy=self.proxy,
                progress=progress,
                deadline=asyncio.get_running_loop().time() + timeout,
            )
        except TimeoutError:
            if self.proxy is not None and progress.stage == "proxy":
                detail = f"proxy {self.proxy.label} did not answer CONNECT in time"
                raise ClusterRequestError(Reason.PROXY, detail) from None
            raise ClusterRequestError(Reason.TIMEOUT, "no answer in time") from None
        except Exception as exc:  # every failure becomes a reason; nothing escapes as a crash
            reason, detail = _classify(exc)
            raise ClusterRequestError(reason, detail) from None

    async def get_json(self, path: str, timeout: float) -> Any:  # noqa: ASYNC109 - as get()
        """Decoded JSON of a 200 answer; other answers raise :class:`ClusterRequestError`."""
        body = ok_body(*await self.get(path, timeout), path)
        try:
            return json.loads(body)
        except ValueError:
            raise ClusterRequestError(Reason.HTTP_ERROR, f"invalid JSON on {path}", 200) from None


_FAILURE_REASONS = {
    Failure.CONNECT: Reason.CONNECT,
    Failure.TLS: Reason.TLS,
    Failure.PROTOCOL: Reason.HTTP_ERROR,
    Failure.URL: Reason.CONNECT,
    Failure.PROXY: Reason.PROXY,
}


def _classify(exc: Exception) -> tuple[Reason, str]:
    """Map what the pool raised (not a timeout) to a reason and a detail without secrets.

    The pool turns every connection, TLS and protocol failure into :class:`HttpError`;
    anything else is a bug of ours, named by its type.
    """
    if isinstance(exc, HttpError):
        return _FAILURE_REASONS[exc.failure], exc.detail
    return Reason.HTTP_ERROR, f"unexpected {type(exc).__name__}"


async def probe(
    api: ApiClient,
    timeout: float,  # noqa: ASYNC109 - as get()
    gate: Gate | None = None,
) -> ProbeResult:
    """Probe ``/readyz?verbose`` once; never raises for a failure of the cluster."""
    start = time.perf_counter()
    try:
        status, body = await api.get("/readyz?verbose", timeout, READYZ_MAX_BYTES, gate)
    except ClusterRequestError as exc:
        return ProbeResult(False, exc.reason, time.perf_counter() - start, None, exc.detail)
    return verdict(status, body, time.perf_counter() - start)
