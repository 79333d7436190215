"""Which cluster of the store a Flux or Argo CD object deploys to.

Discovery names every cluster it reads from a Secret of the management cluster by that
Secret (``kubeconfig_secret_ref`` ``secret://NAMESPACE/NAME``, with ``#KEY`` for a Secret
the user labels, whose every key is a kubeconfig), and keeps its server as ``endpoint``.
An object's :class:`~reactor.cd.objects.Destination` is resolved against those:

- **Flux**: the Secret and key it names, read as Flux reads them (:func:`resolve_secret`,
  whose table is the spec), against what discovery read of that Secret (its kind and the
  names of its keys, ``discovery.merge``'s ``Merged.secrets``).
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

from discovery.secrets import CAPI_KEY, SecretShape
from reactor.cd.objects import Destination
from reactor.statemachine import Status

SECRET_SCHEME = "secret://"
#: The keys Flux reads, in this order, when ``secretRef`` names none (fluxcd/pkg
#: ``runtime/client/impersonator.go``, helm-controller ``internal/kube/config.go``).
FLUX_DEFAULT_KEYS = ("value", "value.yaml")

#: What discovery from the API hands the mirror: the aliases (duplicate Secret ref -> its
#: cluster) and every Secret read, by ref (``discovery.merge.Merged``).
Discovered = tuple[Mapping[str, str], Mapping[str, SecretShape]]


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
    #: what discovery read of each Secret, by ``secret://NAMESPACE/NAME``
    secrets: Mapping[str, SecretShape] = field(default_factory=dict)

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
            dict(secrets or {}),
        )

    def resolve(self, destination: Destination) -> str | Unresolved:
        """The cluster's name, or why there is none."""
        if destination.secret_ref is not None:
            shape = self.secrets.get(destination.secret_ref)
            return resolve_secret(
                destination.secret_ref, destination.secret_key, shape, self.by_ref
            )
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
    not read Secrets through the API (its clusters came from ``POST /clusters``), its first
    list is not done, or the Secret is none discovery reads (then the store has no
    cluster of it either: "no cluster discovered").
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
