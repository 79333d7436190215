"""What ``--web.config.file`` asks of every request, as aiohttp middlewares for both servers.

In exporter-toolkit's order: the configured headers go on every answer (a 401, a 403 and
a streamed ``/metrics`` included: :func:`add_headers` hooks the moment any answer's
headers are sent), then the client certificate's names are checked against
``client_allowed_sans``, then basic auth (``fleetwatch.common.basicauth``).

``client_allowed_sans``: exporter-toolkit refuses the TLS handshake of a certificate that
names none of them; Python's ``ssl`` has no hook in the handshake to do that, so the
handshake completes and every request on that connection is answered 403, before any
handler or password check runs. The names compared are the certificate's DNS, IP (as
addresses: ``::1`` is ``0:0:0:0:0:0:0:1``), email and URI subject alternative names.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

from fleetwatch.common.basicauth import Alternative, BasicAuth, basic_auth_middleware
from fleetwatch.common.webconfig import WebConfig

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def guard_middlewares(
    config: WebConfig | None, also_accept: Alternative | None = None
) -> list[Any]:
    """The middlewares ``config`` asks for, outermost first (none without a config)."""
    if config is None:
        return []
    found: list[Any] = []
    if config.tls is not None and config.tls.client_allowed_sans:
        found.append(allowed_sans_middleware(config.tls.client_allowed_sans))
    if config.users:
        found.append(basic_auth_middleware(BasicAuth(config.users), also_accept))
    return found


def add_headers(app: web.Application, config: WebConfig | None) -> None:
    """``http_server_config.headers`` on every answer of ``app``."""
    if config is None or not config.headers:
        return
    headers = dict(config.headers)

    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(headers)

    app.on_response_prepare.append(on_prepare)


def _normal(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name.strip()))
    except ValueError:
        return name.strip()


def certificate_names(peercert: dict[str, Any] | None) -> set[str]:
    """The subject alternative names of ``ssl.SSLSocket.getpeercert()``'s answer."""
    if not peercert:
        return set()
    return {_normal(str(value)) for _, value in peercert.get("subjectAltName", ())}


def allowed_sans_middleware(allowed: Iterable[str]) -> Any:
    wanted = {_normal(name) for name in allowed}

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        if certificate_names(peercert) & wanted:
            return await handler(request)
        log.debug("client certificate refused: none of client_allowed_sans")
        return web.Response(status=403, text="Forbidden: client certificate not allowed\n")

    return middleware
