"""A connected non-blocking TCP socket to a host: the first step of every connection.

The pool (``exporter.net.pool``) opens the socket here, then hands it to
``exporter.net.connection.Connection`` for the proxy's tunnel and TLS.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any


async def open_socket(host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket to ``host`` (an IP address or a name).

    A name is resolved with the loop's ``getaddrinfo`` (in its executor, never blocking
    the loop); each address is tried in turn, as ``loop.create_connection`` does. Raises
    ``OSError`` (``socket.gaierror`` for a name that does not resolve).
    """
    loop = asyncio.get_running_loop()
    literal = _ip_literal(host)
    infos: list[tuple[socket.AddressFamily, Any]]
    if literal is not None:
        infos = [(literal, (host, port))]
    else:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        infos = [(family, address) for family, _, _, _, address in found]
        if not infos:
            raise OSError("getaddrinfo() returned empty list")
    errors: list[OSError] = []
    for family, address in infos:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's transports
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            errors.append(exc)
            continue
        except BaseException:  # cancelled (a timeout): the socket is ours to close
            sock.close()
            raise
        return sock
    if len(errors) == 1 or len({str(e) for e in errors}) == 1:
        raise errors[0]
    raise OSError(f"Multiple exceptions: {', '.join(str(e) for e in errors)}")


def _ip_literal(host: str) -> socket.AddressFamily | None:
    """The family of an IP address literal, or None for a name."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family
    return None
