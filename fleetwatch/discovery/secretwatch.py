"""Which list+watches find the management cluster's cluster Secrets.

No one label selector finds the three kinds of ``fleetwatch.discovery.secrets``, so each
has its own :class:`WatchSpec` — Argo CD's (``argocd.argoproj.io/secret-type=cluster``),
Cluster API's (label ``cluster.x-k8s.io/cluster-name``, field
``type=cluster.x-k8s.io/secret``) and the user's (``--discovery.kubernetes.label-selector``)
— times each namespace given (none: cluster-wide). ``fleetwatch.kube.informer`` runs them
(any ``Watched`` collection): the kinds are discovery's, the list+watch the client's.

Pure data: the pure-discovery contract holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleetwatch.discovery.secrets import ARGOCD_CLUSTER, ARGOCD_LABEL, CAPI_LABEL, CAPI_TYPE, Kind

__all__ = ["WatchSpec", "watch_specs"]


@dataclass(frozen=True)
class WatchSpec:
    """One list+watch: a kind's selectors, in one namespace or cluster-wide (None)."""

    kind: Kind
    label_selector: str
    field_selector: str = ""
    namespace: str | None = None

    @property
    def path(self) -> str:
        if self.namespace is None:
            return "/api/v1/secrets"
        return f"/api/v1/namespaces/{self.namespace}/secrets"

    def __str__(self) -> str:
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        selectors = ", ".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"{self.kind} Secrets ({selectors}) in {where}"


def watch_specs(label_selector: str, namespaces: Sequence[str] = ()) -> list[WatchSpec]:
    """The three kinds' list+watches, per namespace given, or cluster-wide."""
    specs = []
    where: list[str | None] = [*dict.fromkeys(namespaces)] or [None]
    for ns in where:
        specs.append(WatchSpec("argocd", f"{ARGOCD_LABEL}={ARGOCD_CLUSTER}", "", ns))
        specs.append(WatchSpec("cluster-api", CAPI_LABEL, f"type={CAPI_TYPE}", ns))
        specs.append(WatchSpec("labelled", label_selector, "", ns))
    return specs
