"""Which cluster of the store a Flux or Argo CD object deploys to.

Discovery names every cluster it reads from a Secret of the management cluster by that
Secret (``kubeconfig_secret_ref`` ``secret://NAMESPACE/NAME``, with ``#KEY`` for a Secret
the user labels, whose every key is a kubeconfig), and keeps its server as ``endpoint``.
An object's :class:`~reactor.cd.objects.Destination` is resolved against those:

- **Flux**: the Secret and key it names, read as Flux reads them (:func:`resolve_secret`,
  whose table is the spec), against what discovery read of that Secret (its kind and the
  names of its keys, ``fleetwatch.discovery.merge``'s ``Merged.secrets``).
- **Argo CD**: as Argo CD resolves a destination, against its own cluster Secrets only
  (:meth:`ClusterIndex.resolve_argocd`, whose table is the spec): a Cluster API or a
  labelled Secret of the same name is none of Argo CD's.

A Secret discovery set aside as a duplicate of a cluster of the same name at the same
server (``fleetwatch.discovery.merge``'s aliases: Argo CD's and Cluster API's Secrets of one
cluster)
names that cluster too: for Flux, unless a cluster of the store holds that ref itself;
for Argo CD, when it is an Argo CD cluster Secret (Argo CD knows the cluster by it).

Anything unresolved stays out of the store (an object is an app of one cluster) and is
reported with its reason; it is tried again at every resync, so a cluster discovered
later picks up its objects.

Pure: records in, names out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleetwatch.common.foreground import paced
from fleetwatch.discovery.argocd import IN_CLUSTER_SERVER
from fleetwatch.discovery.secrets import CAPI_KEY, SecretShape
from reactor.cd.objects import Destination
from reactor.store import KnownCluster

SECRET_SCHEME = "secret://"
#: The keys Flux reads, in this order, when ``secretRef`` names none (fluxcd/pkg
#: ``runtime/client/impersonator.go``, helm-controller ``internal/kube/config.go``).
FLUX_DEFAULT_KEYS = ("value", "value.yaml")
#: Argo CD's name of the cluster it runs in, at :data:`IN_CLUSTER_SERVER`, when no cluster
#: Secret takes the name (``KubernetesInClusterName``, argo-cd ``util/db/cluster.go``).
IN_CLUSTER_NAME = "in-cluster"
#: How a reason names a Secret Argo CD does not read, by discovery's kind.
_NOT_ARGOCD = {
    "cluster-api": "a Cluster API Secret",
    "labelled": "a Secret labelled for fleetwatch",
}

#: What discovery from the API hands the mirror: the aliases (duplicate Secret ref -> its
#: cluster) and every Secret read, by ref (``fleetwatch.discovery.merge.Merged``).
Discovered = tuple[Mapping[str, str], Mapping[str, SecretShape]]


@dataclass(frozen=True)
class ClusterIndex:
    """The store's clusters by Secret reference, and Argo CD's by name and server."""

    by_ref: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the clusters Argo CD knows by a cluster Secret (or may: a Secret not read)
    argocd_names: frozenset[str] = frozenset()
    argocd_by_server: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: what discovery read of each Secret, by ``secret://NAMESPACE/NAME``
    secrets: Mapping[str, SecretShape] = field(default_factory=dict)
    #: the clusters of a Secret without a key, of any kind: the names an Argo CD cluster
    #: Secret's ``name`` key is matched against (``reactor.cd.clustersecrets``)
    keyless: frozenset[str] = frozenset()
    #: the clusters from a Secret Argo CD does not read, none of Argo CD's: name -> ref,
    #: and server -> (name, ref) (the reason an Application naming one is unresolved)
    not_argocd: Mapping[str, str] = field(default_factory=dict)
    not_argocd_servers: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        clusters: Iterable[KnownCluster],
        aliases: Mapping[str, str] | None = None,
        secrets: Mapping[str, SecretShape] | None = None,
    ) -> ClusterIndex:
        """``aliases``: duplicate Secret ref -> its cluster's name (module docstring);
        ``secrets``: discovery's Secrets, their kinds and key names (none: the reactor
        does not read Secrets through the API)."""
        secrets = dict(secrets or {})
        by_ref: dict[str, list[str]] = defaultdict(list)
        names: set[str] = set()
        keyless: set[str] = set()
        by_server: dict[str, list[str]] = defaultdict(list)
        not_argocd: dict[str, str] = {}
        not_argocd_servers: dict[str, tuple[str, str]] = {}
        endpoints: dict[str, str] = {}

        def argocd(name: str, endpoint: str | None) -> None:
            names.add(name)
            server = (endpoint or "").rstrip("/")
            if server and name not in by_server[server]:
                by_server[server].append(name)

        for cluster in paced(clusters):
            ref = cluster.kubeconfig_secret_ref
            if ref is None or not ref.startswith(SECRET_SCHEME):
                continue
            by_ref[ref].append(cluster.name)
            endpoints[cluster.name] = cluster.endpoint or ""
            shape = secrets.get(ref.partition("#")[0])
            if shape is not None and shape.kind != "argocd":
                not_argocd[cluster.name] = ref
                if cluster.endpoint:
                    server = cluster.endpoint.rstrip("/")
                    not_argocd_servers.setdefault(server, (cluster.name, ref))
            if "#" in ref:
                continue
            keyless.add(cluster.name)
            if shape is None or shape.kind == "argocd":  # not read: the store alone
                argocd(cluster.name, cluster.endpoint)
        for ref, name in (aliases or {}).items():
            if name not in endpoints:
                continue
            if ref not in by_ref:
                by_ref[ref].append(name)
            shape = secrets.get(ref)
            if "#" not in ref and (shape is None or shape.kind == "argocd"):
                argocd(name, endpoints[name])  # an alias is at its cluster's server
        return cls(
            {ref: tuple(n) for ref, n in by_ref.items()},
            frozenset(names),
            {server: tuple(n) for server, n in by_server.items() if n},
            secrets,
            frozenset(keyless),
            {n: r for n, r in not_argocd.items() if n not in names},
            {s: found for s, found in not_argocd_servers.items() if s not in by_server},
        )

    def resolve(self, destination: Destination) -> str | Unresolved:
        """The cluster's name, or why there is none."""
        if destination.secret_ref is not None:
            shape = self.secrets.get(destination.secret_ref)
            return resolve_secret(
                destination.secret_ref, destination.secret_key, shape, self.by_ref
            )
        return self.resolve_argocd(destination)

    def resolve_argocd(self, destination: Destination) -> str | Unresolved:
        """An Application's cluster as Argo CD finds it, or why there is none.

        Argo CD (argo-cd ``util/argo/argo.go`` ``GetDestinationServer`` and
        ``GetDestinationCluster``, ``util/db/cluster.go`` ``GetClusterServersByName`` and
        ``GetCluster``) reads only its own cluster Secrets (label
        ``argocd.argoproj.io/secret-type: cluster``): ``destination.name`` is the server of
        the Secret whose ``name`` key it is (several: an error), ``in-cluster`` being
        ``https://kubernetes.default.svc`` when no Secret takes that name;
        ``destination.server`` (a trailing ``/`` aside) is the Secret at that server, or the
        cluster Argo CD runs in at ``https://kubernetes.default.svc``.

        =================  =====================  ============================================
        destination        the store holds        resolves to
        =================  =====================  ============================================
        ``name`` N         an Argo CD cluster N   that cluster
        ``name`` N         a cluster N from       a problem: Argo CD knows no cluster Secret
                           another Secret         named N (the reason names the Cluster API or
                                                  labelled Secret, which Argo CD does not read)
        ``name`` N         no cluster N           a problem: no cluster discovered as N
        ``name``           no Argo CD cluster     as ``server``
        ``in-cluster``     of that name           ``https://kubernetes.default.svc``
        ``server`` S       one Argo CD cluster    that cluster
                           at S
        ``server`` S       several                a problem: Argo CD takes the first Secret it
                                                  finds at S, which the store cannot tell
        ``server`` S       only another           a problem: Argo CD knows no cluster Secret
                           Secret's cluster at S  with that server (the reason names it)
        ``server`` the     no Argo CD cluster     a problem: Argo CD's in-cluster destination,
        in-cluster one     at it                  the management cluster itself, which the
                                                  store knows by no Argo CD cluster Secret
        ``server`` S       nothing at S           a problem: no cluster discovered at S
        =================  =====================  ============================================

        "An Argo CD cluster": discovered from an Argo CD cluster Secret, kept or an alias, or
        from a Secret discovery did not read (the store alone: the reactor does not read
        Secrets through the API; the mirror never resolves against a half-listed fleet,
        ``reactor.cd.actuator``). A problem never carries a value of a Secret.
        """
        name = destination.argocd_name
        if name is not None:
            if name in self.argocd_names:
                return name
            ref = self.not_argocd.get(name)
            if name == IN_CLUSTER_NAME:
                server = IN_CLUSTER_SERVER
            elif ref is not None:
                return Unresolved(
                    f"Argo CD knows no cluster Secret named {name!r}: the cluster discovered "
                    f"as {name} came from {ref} ({self._kind(ref)}), which Argo CD does not read"
                )
            else:
                return Unresolved(f"no cluster discovered as {destination}")
        else:
            server = destination.argocd_server or ""
        names = self.argocd_by_server.get(server, ())
        if len(names) == 1:
            return names[0]
        if names:
            return Unresolved(
                f"{len(names)} Argo CD clusters have server {server} ({', '.join(names)}): "
                "Argo CD takes the first cluster Secret it finds there"
            )
        other = self.not_argocd_servers.get(server)
        if other is not None:
            other_name, ref = other
            return Unresolved(
                f"Argo CD knows no cluster Secret with server {server}: the cluster there, "
                f"{other_name}, came from {ref} ({self._kind(ref)}), which Argo CD does not read"
            )
        if server == IN_CLUSTER_SERVER:
            return Unresolved(
                f"{destination} is Argo CD's in-cluster destination ({IN_CLUSTER_SERVER}), "
                "the management cluster itself: the store knows no cluster there (no Argo CD "
                "cluster Secret at that server was discovered)"
            )
        return Unresolved(f"no cluster discovered at {destination}")

    def _kind(self, ref: str) -> str:
        shape = self.secrets.get(ref.partition("#")[0])
        return _NOT_ARGOCD.get(shape.kind, "a Secret") if shape is not None else "a Secret"


@dataclass(frozen=True, slots=True)
class Unresolved:
    reason: str


def resolve_secret(
    ref: str,
    key: str | None,
    secret: SecretShape | None,
    by_ref: Mapping[str, tuple[str, ...]],
) -> str | Unresolved:
    """The cluster a Flux object deploys to through ``spec.kubeConfig.secretRef``, read as
    Flux reads it, or why there is none.

    Flux (fluxcd/pkg ``runtime/client/impersonator.go`` for a Kustomization,
    helm-controller ``internal/kube/config.go`` for a HelmRelease) loads the kubeconfig at
    the key named; with no key, at ``value``, else at ``value.yaml``; a Secret without that
    key is an error, and the cluster is the kubeconfig's current context. ``ref`` is the
    Secret (``secret://NAMESPACE/NAME``), ``key`` the key named (None: none), ``secret``
    what discovery read of it (its kind and key names; None: not read), ``by_ref`` the
    store's clusters and discovery's aliases by ``kubeconfig_secret_ref``.

    ===============  ==========  ===========================================================
    Secret           key named   resolves to
    ===============  ==========  ===========================================================
    any kind read    none        as if Flux's default were named: ``value`` if the Secret
                                 has it, else ``value.yaml``; neither: a problem (Flux
                                 cannot read the Secret)
    any kind read    K           K is not one of its keys: a problem (Flux cannot read it)
    Cluster API      ``value``   its cluster: ``secret://NS/NAME``, as discovery records
                                 it, or the cluster it duplicates (an alias)
    Cluster API      another     a problem: its cluster is read from ``value`` only
    labelled         K           the one cluster of ``secret://NS/NAME#K``; several
                                 (contexts): a problem, Flux takes the current context and
                                 the store knows none; none: a problem, K holds no
                                 kubeconfig discovery could read
    Argo CD cluster  any         a problem: its keys (``name``, ``server``, ``config``) are
                                 Argo CD's, none is a kubeconfig; with no key Flux finds
                                 no ``value`` and refuses it
    not read         K           the store alone: ``#K``, and for ``value`` the bare ref
                                 too (how a Cluster API Secret's cluster is recorded)
    not read         none        the store alone: the bare ref, ``#value``, ``#value.yaml``
    ===============  ==========  ===========================================================

    A problem names the Secret and the key, never a value. "Not read": the reactor does
    not read Secrets through the API (its clusters came from ``POST /clusters``), or the
    Secret is none discovery reads (then the store has no cluster of it either: "no
    cluster discovered"); the mirror waits for discovery's first list
    (``reactor.cd.actuator``).
    """
    if secret is None:
        if key is None:
            candidates: tuple[str, ...] = (ref, *(f"{ref}#{k}" for k in FLUX_DEFAULT_KEYS))
        else:
            candidates = (f"{ref}#{key}", ref) if key == CAPI_KEY else (f"{ref}#{key}",)
        for candidate in candidates:
            names = by_ref.get(candidate, ())
            if len(names) > 1:
                return _contexts(ref, key, len(names))
            if names:
                return names[0]
        named = "" if key is None else f" (key {key!r})"
        return Unresolved(f"no cluster discovered from Secret {ref}{named}")
    if key is None:
        key = next((k for k in FLUX_DEFAULT_KEYS if k in secret.keys), None)
        if key is None:
            argo = " (an Argo CD cluster Secret)" if secret.kind == "argocd" else ""
            return Unresolved(
                f"Secret {ref}{argo} has neither key 'value' nor 'value.yaml', which Flux "
                "reads when spec.kubeConfig.secretRef names no key"
            )
    elif key not in secret.keys:
        return Unresolved(f"Secret {ref} has no key {key!r} (spec.kubeConfig.secretRef.key)")
    if secret.kind == "argocd":
        return Unresolved(
            f"Secret {ref} is an Argo CD cluster Secret: its key {key!r} is no kubeconfig "
            "Flux can read"
        )
    if secret.kind == "cluster-api":
        if key != CAPI_KEY:
            return Unresolved(
                f"Secret {ref} is a Cluster API Secret: its cluster is read from key "
                f"'value', not {key!r}"
            )
        names = by_ref.get(ref, ())
        if names:
            return names[0]
        return Unresolved(f"no cluster discovered from Secret {ref}")
    names = by_ref.get(f"{ref}#{key}", ())
    if len(names) > 1:
        return _contexts(ref, key, len(names))
    if names:
        return names[0]
    return Unresolved(f"key {key!r} of Secret {ref} holds no cluster discovery could read")


def _contexts(ref: str, key: str | None, count: int) -> Unresolved:
    named = "" if key is None else f"key {key!r} of "
    return Unresolved(
        f"{named}Secret {ref} holds {count} clusters (contexts): Flux uses the kubeconfig's "
        "current context, which fleetwatch cannot tell"
    )
