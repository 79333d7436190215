"""``--web.listen-address``: one meaning for the exporter and the reactor.

As in Prometheus and its exporters, ``host:port`` binds that address and ``:port`` binds
every interface (IPv4 and IPv6). The defaults of both servers name 127.0.0.1 explicitly,
so nothing listens beyond the machine unless asked to.
"""

from __future__ import annotations

import socket


class ListenAddressError(ValueError):
    """A ``--web.listen-address`` that is not ``host:port`` or ``:port``."""


def parse_listen_address(value: str) -> tuple[str | None, int]:
    """``host:port`` -> ``(host, port)``; ``:port`` -> ``(None, port)``: every interface.

    ``None`` is what asyncio's ``create_server`` and aiohttp's ``TCPSite`` take for "all
    interfaces"; brackets around an IPv6 host are removed (``[::1]:9713``).
    """
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ListenAddressError(
            f"--web.listen-address {value!r}: expected host:port or :port, e.g. 127.0.0.1:9713"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host or None), int(port)


def display_address(host: str | None, port: int) -> str:
    """How a log line names a listen address: ``[::1]:9713``, ``*:9713`` for every interface."""
    if host is None:
        return f"*:{port}"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_socket(host: str | None, port: int) -> socket.socket:
    """A listening TCP socket for ``parse_listen_address``'s answer (raises ``OSError``).

    Servers bind before they start anything else, so a busy port fails at once, before a
    database is opened or written. ``None`` binds every interface, IPv6 and IPv4 together
    where the system can (as Go's ``:port`` does).
    """
    if host is None:
        if socket.has_dualstack_ipv6():
            return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
        return socket.create_server(("", port))
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)
