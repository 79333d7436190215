"""Listening sockets for stand-in clusters: fast port picking, and restarts on the same port."""

from __future__ import annotations

import errno
import secrets
import socket


def _listening_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # SO_REUSEADDR lets a restarted cluster bind its port again while old
        # connections linger and while the placeholder keeps it reserved.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


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
        for _ in range(high - low + 1):
            candidate = self._next
            self._next = low if candidate >= high else candidate + 1
            try:
                return _listening_socket(candidate)
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
