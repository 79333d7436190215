"""Listening sockets for stand-in clusters: fast port picking, and restarts on the same port."""

from __future__ import annotations

import errno
import secrets
import socket


def _listening_socket(port: int, *, exclusive: bool = False) -> socket.socket:
    """A socket listening on 127.0.0.1:``port``.

    ``exclusive`` (picking a new port) binds without SO_REUSEADDR, so it fails on a port
    that a down cluster's placeholder holds (or where connections linger): another fleet
    never takes a port one of ours will come back on. A cluster coming back on its own
    port sets SO_REUSEADDR, to bind past its placeholder and its TIME_WAIT connections.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if not exclusive:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        # Set after an exclusive bind too: accepted connections inherit it, and their
        # TIME_WAIT would otherwise block the placeholder and the bind of a comeback.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


#: Ports tried in turn before asking the OS (about 40 microseconds each).
MAX_TRIES = 2000


def claim(port: int) -> socket.socket:
    """Listen on ``port`` as a new cluster would: only if nobody holds it, placeholders included."""
    return _listening_socket(port, exclusive=True)


class PortPicker:
    """Free ports for new clusters, found by trying them in turn below the ephemeral range.

    Asking the OS for port 0 costs milliseconds per bind once a machine holds tens of
    thousands of sockets (the kernel scans for a free one); binding a named port costs
    microseconds. Ports below ``ip_local_port_range`` are never handed to outgoing
    connections or to ``free_port()``, so only another fleet can be there, and then
    the bind fails and we move on. Without such a range the OS chooses.
    """

    def __init__(self) -> None:
        low, high = 10000, _ephemeral_low() - 1
        self._range = (low, high) if high - low >= 1000 else None
        self._next = secrets.randbelow(high - low) + low if self._range else 0

    def bind(self, port: int) -> socket.socket:
        """A listening socket on ``port``, or on a new free port when ``port`` is 0."""
        if port or self._range is None:
            return _listening_socket(port)
        low, high = self._range
        # Bounded: where the range is crowded (another large fleet, many TIME_WAIT
        # connections) the OS choosing is cheaper than scanning all of it.
        for _ in range(min(high - low + 1, MAX_TRIES)):
            candidate = self._next
            self._next = low if candidate >= high else candidate + 1
            try:
                return claim(candidate)
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise
        return _listening_socket(0)


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
