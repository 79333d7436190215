"""Which cluster of the store a Flux or Argo CD object deploys to.

Discovery names every cluster it reads from a Secret of the management cluster by that
Secret (``kubeconfig_secret_ref`` ``secret://NAMESPACE/NAME``, with ``#KEY`` for a Secret
the user labels, whose every key is a kubeconfig), and keeps its server as ``endpoint``.
An object's :class:`~reactor.cd.objects.Destination` is resolved against those:

- **Flux**: the first of its candidate references (``#KEY`` when the object names a key;
  else the bare Secret, then ``#value``, then ``#value.yaml``, Flux's own order) that
  names exactly one cluster. A key whose kubeconfig holds several contexts names several
  clusters, and Flux uses the kubeconfig's current context, which the store does not
  know: unresolved, with that reason.
- **Argo CD**: ``name`` is the cluster of that name; ``server`` is the one cluster at
  that endpoint. Either must have come from a Secret without a key (Argo CD's cluster
  Secrets, named by their ``name`` key; a Cluster API Secret is too, and is the same
  cluster by name as discovery keeps the first of two of one name).

A Secret discovery set aside as a duplicate of a cluster of the same name at the same
server (``discovery.merge``'s aliases: Argo CD's and Cluster API's Secrets of one cluster)
names that cluster for Flux too, unless a cluster of the store holds that ref itself.

Anything unresolved stays out of the store (an object is an app of one cluster) and is
reported with its reason; it is tried again at every resync, so a cluster discovered
later picks up its objects.

Pure: records in, names out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from reactor.cd.objects import Destination
from reactor.statemachine import Status

SECRET_SCHEME = "secret://"


@dataclass(frozen=True, slots=True)
class KnownCluster:
    """What the store holds of a cluster that matters here."""

    name: str
    endpoint: str | None
    kubeconfig_secret_ref: str | None
    #: its status and open outage (a cluster Secret is decided on them)
    status: Status | None = None
    outage_id: int | None = None


@dataclass(frozen=True)
class ClusterIndex:
    """The store's clusters by Secret reference, and Argo CD's by name and server."""

    by_ref: dict[str, tuple[str, ...]] = field(default_factory=dict)
    argocd_names: frozenset[str] = frozenset()
    argocd_by_server: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, clusters: Iterable[KnownCluster], aliases: Mapping[str, str] | None = None
    ) -> ClusterIndex:
        """``aliases``: duplicate Secret ref -> its cluster's name (module docstring)."""
        by_ref: dict[str, list[str]] = defaultdict(list)
        names: set[str] = set()
        by_server: dict[str, list[str]] = defaultdict(list)
        known: set[str] = set()
        for cluster in clusters:
            known.add(cluster.name)
            ref = cluster.kubeconfig_secret_ref
            if ref is None or not ref.startswith(SECRET_SCHEME):
                continue
            by_ref[ref].append(cluster.name)
            if "#" not in ref:
                names.add(cluster.name)
                if cluster.endpoint:
                    by_server[cluster.endpoint.rstrip("/")].append(cluster.name)
        for ref, name in (aliases or {}).items():
            if name in known and ref not in by_ref:
                by_ref[ref].append(name)
        return cls(
            {ref: tuple(n) for ref, n in by_ref.items()},
            frozenset(names),
            {server: tuple(n) for server, n in by_server.items()},
        )

    def resolve(self, destination: Destination) -> str | Unresolved:
        """The cluster's name, or why there is none."""
        if destination.secret_refs:
            for ref in destination.secret_refs:
                names = self.by_ref.get(ref, ())
                if len(names) == 1:
                    return names[0]
                if names:
                    return Unresolved(
                        f"{ref} holds {len(names)} clusters (contexts): Flux uses the "
                        "kubeconfig's current context, which fleetwatch cannot tell"
                    )
            return Unresolved(f"no cluster discovered from {destination}")
        if destination.argocd_name is not None:
            if destination.argocd_name in self.argocd_names:
                return destination.argocd_name
            return Unresolved(f"no cluster discovered as {destination}")
        server = destination.argocd_server or ""
        names = self.argocd_by_server.get(server, ())
        if len(names) == 1:
            return names[0]
        if names:
            return Unresolved(f"{len(names)} Argo CD clusters have server {server}")
        return Unresolved(f"no cluster discovered at {destination}")


@dataclass(frozen=True, slots=True)
class Unresolved:
    reason: str
