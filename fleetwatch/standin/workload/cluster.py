"""One stand-in cluster's state (its mode, token, topology, request count) and the modes.

Its own module so that the fleet (which opens and closes the sockets) and the serving path
(which answers on them) both read it without importing each other.
"""

from __future__ import annotations

from enum import StrEnum

from fleetwatch.standin.workload.controlplane import ControlPlane


class Mode(StrEnum):
    """How a stand-in cluster answers (see ``fleetwatch.standin.workload.fleet``)."""

    OK = "ok"
    DOWN = "down"
    HANG = "hang"
    #: TCP is accepted (the kernel's backlog) but the TLS handshake never answered: an API
    #: server process that is stopped or wedged, where ``hang`` answers the handshake
    FROZEN = "frozen"
    ERROR = "error"
    NOT_READY = "not_ready"
    UNAUTHORIZED = "unauthorized"
    #: authenticated, then refused by authorization (RBAC): 403 for every path
    FORBIDDEN = "forbidden"
    WRONG_CA = "wrong_ca"


def parse_mode(mode: str) -> Mode:
    """``Mode`` from its name, or ``ValueError`` naming the valid ones."""
    try:
        return Mode(mode)
    except ValueError:
        valid = ", ".join(m.value for m in Mode)
        raise ValueError(f"unknown mode {mode!r}; expected one of: {valid}") from None


class StandinCluster:
    """One stand-in API server: its port, its bearer token, its mode and request count."""

    __slots__ = (
        "blocked_clients",
        "control_plane",
        "index",
        "mode",
        "name",
        "port",
        "requests",
        "token",
    )

    def __init__(self, name: str, index: int, token: str, control_plane: ControlPlane) -> None:
        self.name = name
        #: Position in the fleet; gives the cluster its own loopback node addresses.
        self.index = index
        self.token = token
        self.mode = Mode.OK
        self.port = 0
        #: Requests received (any path, any answer); "was this cluster probed?".
        self.requests = 0
        self.control_plane = control_plane
        #: Common names of client certificates whose requests are never answered.
        self.blocked_clients: frozenset[str] = frozenset()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __repr__(self) -> str:  # never the token
        return f"StandinCluster({self.name!r}, {self.url}, mode={self.mode.value})"
