"""A stand-in management cluster: the Kubernetes API where a platform team keeps its fleet.

Secrets (Argo CD cluster Secrets, Cluster API kubeconfig Secrets), Leases, and the CD
objects fleetwatch pauses and resumes (Flux ``Kustomization``/``HelmRelease``, Argo CD
``Application``), served with the protocol kubectl and client-go speak: discovery, one
global resourceVersion, list and watch with bookmarks and ``410 Expired``, every patch
type, server-side apply, RBAC-shaped 401/403, ``Status`` errors. A control API breaks it
on purpose. ``docs/STANDIN.md`` ("The management cluster") says what is faithful and what
is simplified.

Modules: ``kinds`` (the served resources and discovery), ``openapi``, ``validation``,
``objects`` (what the server does to an object on its way in), ``fields`` (managedFields
and server-side apply), ``patches``, ``selectors``, ``store`` (objects, revisions,
history), ``requests`` (a request's target), ``lists``, ``watch``, ``auth``, ``faults``,
``status`` (errors), ``api`` (the HTTP API), ``control`` (the control API), ``seed``,
``cluster`` (start and stop, in-process), ``process`` (in a child process), ``cli``.

Names are imported on first use (PEP 562), as in ``fleetwatch.standin``: the command line
imports ``management.cli`` for its parser, and the exec plugin sharing that parser must
not load aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetwatch.standin.management.cluster import (
        ManagementCluster,
        ManagementSettings,
        ThreadedManagementCluster,
    )
    from fleetwatch.standin.management.process import ManagementProcess

__all__ = [
    "ManagementCluster",
    "ManagementProcess",
    "ManagementSettings",
    "ThreadedManagementCluster",
]


def __getattr__(name: str) -> Any:
    if name == "ManagementProcess":
        from fleetwatch.standin.management import process

        return process.ManagementProcess
    if name in __all__:
        from fleetwatch.standin.management import cluster

        return getattr(cluster, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
