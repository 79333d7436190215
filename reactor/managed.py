"""Apps mirrored from Flux and Argo CD objects belong to those tools: the API does not
deploy, move or report them.

Such an app (``reactor.cd``: source ``flux`` or ``argocd``) is the reactor's picture of an
object that Flux or Argo CD deploys, to the cluster the object itself names. A
``POST /deployments`` or ``PATCH /apps`` on it could only make the store disagree with
the object: "DEPLOYED on c2" while Flux deploys to c1, or "DEGRADED" for a reason that no
Flux status says, which would also keep fleetwatch from resuming it after an outage. A
platform team expects the reactor to pause and resume what their tools deploy, never to
deploy it; so those calls are refused with 409 and a message naming the tool and the
field to change instead. The gate (``fleetwatch gate``, ``reactor.gate``) answers for the
cluster whatever deploys there.

Pure: a name and a source in, the refusal's words out.
"""

from __future__ import annotations

from reactor.store import MIRRORED_PREFIXES

#: source -> (the tool, the field of its object that says where it deploys)
MANAGERS = {
    "flux": ("Flux", "spec.kubeConfig"),
    "argocd": ("Argo CD", "spec.destination"),
}


def managed_elsewhere(app: str, source: str) -> str | None:
    """Why the API refuses to deploy, move or report ``app``; None for an app of the API."""
    if source not in MANAGERS:
        return None
    tool, where = MANAGERS[source]
    return (
        f"app {app!r} is managed by {tool} (source {source}): deploy, move or repair it "
        f"through {tool} (its object's {where} names its cluster); the reactor only pauses "
        "and resumes it with its cluster's outages"
    )


def mirrored(app: str) -> bool:
    """Is ``app`` named as an app mirrored from a Flux or Argo CD object
    (``SOURCE:KIND/NAMESPACE/NAME``, a name the API may not create)? Only such an app can
    be refused by :func:`managed_elsewhere`, which needs its row: its deployment is decided
    on a store thread, never on the pipelined fast path (``reactor.context``)."""
    return app.startswith(MIRRORED_PREFIXES)
