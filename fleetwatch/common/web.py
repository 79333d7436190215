"""``--web.listen-address``: one meaning for the exporter and the reactor.

As in Prometheus and its exporters, ``host:port`` binds that address and ``:port`` binds
every interface (IPv4 and IPv6). The defaults of both servers name 127.0.0.1 explicitly,
so nothing listens beyond the machine unless asked to. The flag is repeatable, as the
exporter-toolkit's is (``--web.listen-address=127.0.0.1:9713 --web.listen-address=
[::1]:9713``): the server answers on each address, and all are bound before anything
starts, so one busy port fails the start.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence


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


def parse_listen_addresses(values: Sequence[str]) -> list[tuple[str | None, int]]:
    """Each ``--web.listen-address`` given, parsed; the same address twice is once."""
    return list(dict.fromkeys(parse_listen_address(value) for value in values))


def bind_sockets(addresses: Sequence[tuple[str | None, int]]) -> list[socket.socket]:
    """A listening socket per address; if one cannot be bound, those bound are closed and
    the ``OSError`` raised names the address (``cannot listen on HOST:PORT: reason``)."""
    bound: list[socket.socket] = []
    try:
        for host, port in addresses:
            try:
                bound.append(bind_socket(host, port))
            except OSError as exc:
                raise OSError(
                    exc.errno, f"{display_address(host, port)}: {exc.strerror or exc}"
                ) from None
    except OSError:
        for sock in bound:
            sock.close()
        raise
    return bound


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
