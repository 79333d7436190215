"""The stand-in Kubernetes API server: many fake clusters, real TLS, real kubeconfigs.

No kube-apiserver can be installed here, so the tests, the benchmarks and
``fleetwatch demo`` run this instead: one process serves a fleet of clusters on
127.0.0.1, each on its own port, with the answers, certificates and failure modes a
prober meets in the field. ``python -m fleetwatch.standin serve`` runs one by hand.

The stand-ins are independent oracles: ``workload/`` (the fleet's API servers) and
``management/`` (the management cluster's Secrets and Flux and Argo CD objects) import
nothing of the product's parsers (discovery, kube, exporter, reactor), as an import
contract holds. Where both sides need the same grammar (label selectors, kubeconfigs), it
is written twice on purpose: a bug in ours cannot then hide in a stand-in that agrees.

Names are imported on first use (PEP 562): ``python -m fleetwatch.standin exec-credential``
(the exec plugin the kubeconfigs name) must start fast, without aiohttp or cryptography.
Each import is written out, so the import contracts see it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetwatch.standin.workload.certs import FleetCerts
    from fleetwatch.standin.workload.controlplane import ControlPlane, node_ip
    from fleetwatch.standin.workload.fleet import Mode, StandinCluster, StandinFleet
    from fleetwatch.standin.workload.kubeconfig import CaKind, Credential
    from fleetwatch.standin.workload.threaded import ThreadedFleet

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
    if name == "FleetCerts":
        from fleetwatch.standin.workload import certs

        return certs.FleetCerts
    if name in ("ControlPlane", "node_ip"):
        from fleetwatch.standin.workload import controlplane

        return getattr(controlplane, name)
    if name in ("Mode", "StandinCluster", "StandinFleet"):
        from fleetwatch.standin.workload import fleet

        return getattr(fleet, name)
    if name in ("CaKind", "Credential"):
        from fleetwatch.standin.workload import kubeconfig

        return getattr(kubeconfig, name)
    if name == "ThreadedFleet":
        from fleetwatch.standin.workload import threaded

        return threaded.ThreadedFleet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
