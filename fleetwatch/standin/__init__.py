"""The stand-in Kubernetes API server: many fake clusters, real TLS, real kubeconfigs.

No kube-apiserver can be installed here, so the tests, the benchmarks and
``fleetwatch demo`` run this instead: one process serves a fleet of clusters on
127.0.0.1, each on its own port, with the answers, certificates and failure modes a
prober meets in the field. ``python -m fleetwatch.standin serve`` runs one by hand.

Names are imported lazily: ``python -m fleetwatch.standin exec-credential`` (the exec
plugin the kubeconfigs name) must start fast, without aiohttp or cryptography.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetwatch.standin.certs import FleetCerts
    from fleetwatch.standin.controlplane import ControlPlane, node_ip
    from fleetwatch.standin.fleet import Mode, StandinCluster, StandinFleet
    from fleetwatch.standin.kubeconfig import CaKind, Credential
    from fleetwatch.standin.threaded import ThreadedFleet

_EXPORTS = {
    "FleetCerts": "certs",
    "ControlPlane": "controlplane",
    "node_ip": "controlplane",
    "Mode": "fleet",
    "StandinCluster": "fleet",
    "StandinFleet": "fleet",
    "CaKind": "kubeconfig",
    "Credential": "kubeconfig",
    "ThreadedFleet": "threaded",
}

__all__ = [
    "CaKind",
    "ControlPlane",
    "Credential",
    "FleetCerts",
    "Mode",
    "StandinCluster",
    "StandinFleet",
    "ThreadedFleet",
    "node_ip",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
