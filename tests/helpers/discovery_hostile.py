"""A hostile management API for the list+watch tests: the stand-in's faults that break
every watch (or every request), the window over which a reflector's requests are counted,
and the bound they must stay under.

Used by ``tests/discovery`` (the Secrets' informer), ``tests/reactor`` (the CD watches)
and ``bench/hostile_loop.py`` (how late the event loop runs meanwhile: a time, so measured
there and not asserted by a test): one reflector implementation, one set of modes (issue 31).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: mode -> the stand-in fault (``fleetwatch.standin.management.faults``) that makes it
HOSTILE: dict[str, dict[str, Any]] = {
    "410-event": {"kind": "watch_error"},  # ERROR event holding 410 Expired
    "410-http": {"kind": "error", "status": 410, "verb": "watch"},
    "error-event": {"kind": "watch_error", "status": 500},
    "closed-at-once": {"kind": "watch_close"},
    "garbage": {"kind": "watch_garbage"},
    "500": {"kind": "error", "status": 500},  # lists too
}

#: the window (s) over which requests are counted: long enough for three rounds of
#: client-go's backoff (0.8 s, then 1.6 s), in which a reflector without one sends thousands
WINDOW = 4.0


#: the CD watches of ``--cd.flux`` the hostile modes are armed on, and one object of them
FLUX_KINDS = (
    "kustomizations.kustomize.toolkit.fluxcd.io",
    "helmreleases.helm.toolkit.fluxcd.io",
)
KUSTOMIZATION: dict[str, Any] = {
    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
    "kind": "Kustomization",
    "metadata": {"name": "apps", "namespace": "flux-system"},
    "spec": {
        "interval": "10m",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        "kubeConfig": {"secretRef": {"name": "c1-kubeconfig"}},
    },
}


def most_requests(seconds: float) -> float:
    """What one reflector may send in ``seconds``: "about two a second at first" (its
    first round, a list and a watch, comes at once; no backoff sends thousands). A busy
    machine only lowers the count: the bound holds at any load, over the measured time."""
    return 2 * seconds + 2


def requests(counts: Mapping[str, int], resource: str) -> int:
    return counts.get(f"list {resource}", 0) + counts.get(f"watch {resource}", 0)
