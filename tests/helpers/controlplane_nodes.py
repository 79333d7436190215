"""Node addresses for stand-in fleets that serve component metrics.

A fleet with ``serve_metrics`` listens on fixed ports (2381, 6443, 10257, 10259) at
loopback node addresses derived from its clusters' indexes (``127.<a>.<b>.<node>``). Two
such fleets with the same ``first_index`` cannot both listen, whether they belong to two
pytest-xdist workers or to two test runs at once (two worktrees): each test picks a
random ``first_index`` whose addresses nobody listens on right now.
"""

from __future__ import annotations

import secrets
import socket

from fleetwatch.standin import node_ip
from fleetwatch.standin.workload.controlplane import COMPONENTS

#: Index 0 up is where fleets without a chosen ``first_index`` put their clusters.
LOWEST = 1000
#: 254 x 256 address prefixes in all (controlplane.py); keep clear of the wrap-around.
HIGHEST = 254 * 256 - 256


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_first_index(clusters: int = 1, nodes: int = 3) -> int:
    """A random ``first_index`` at whose ``clusters`` x ``nodes`` node addresses every
    component port is free now."""
    for _ in range(100):
        first = LOWEST + secrets.randbelow(HIGHEST - LOWEST - clusters)
        if all(
            _free(node_ip(index, node), port)
            for index in range(first, first + clusters)
            for node in range(1, nodes + 1)
            for port in COMPONENTS.values()
        ):
            return first
    raise RuntimeError("no free node addresses for a stand-in fleet serving metrics")
