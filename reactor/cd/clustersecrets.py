"""Argo CD's cluster Secrets, paused instead of each Application: one patch per cluster.

With ``--cd.argocd.pause cluster-secret`` the annotation ``argocd.argoproj.io/skip-reconcile:
"true"`` and fleetwatch's mark go on the cluster's Argo CD cluster Secret (label
``argocd.argoproj.io/secret-type: cluster``) rather than on each of its Applications:
one patch per cluster, however many Applications deploy there, and Argo CD stops the
whole cluster's work, its cluster cache included.

**Versions.** Argo CD honours the annotation on a cluster Secret from **3.4.0** on
(argoproj/argo-cd#26442, ``controller/sharding/cache.go``: ``IsManagedCluster`` answers
false for a cluster whose Secret carries it, so no Application of that cluster is
processed and its cluster cache is dropped). 3.3 and earlier read it on Applications
only (since 2.7.0) and ignore it on a Secret: there this mode pauses nothing, silently
on Argo CD's side. fleetwatch cannot tell Argo CD's version from the API; docs/cd.md
says so.

The rules are ``reactor.cd.rules``' (:func:`~reactor.cd.rules.secret_view` makes the
Secret one app standing for the cluster's Applications); this module reads the Secrets,
finds each one's cluster, and says what to do with each (:func:`decide_secrets`).

**Nothing of the credentials is kept.** The informer keeps of each such Secret its
metadata, the owners of the annotation (as for the other kinds) and the ``name`` key
(Argo CD's name of the cluster, no credential): :func:`kept`. Its ``config``, the
cluster's credentials, is dropped as it arrives.

**Which cluster.** The Secret whose ``secret://NAMESPACE/NAME`` is a cluster's
``kubeconfig_secret_ref`` (discovery named the cluster by it), else the cluster named by
its ``name`` key, Argo CD's name of it (a cluster discovery took from another Secret of
the same name, a Cluster API one, and this Secret is then Argo CD's record of it, by
which the Applications naming it resolve: ``reactor.cd.targets``).

Pure: dicts and records in, plain data out.
"""

from __future__ import annotations

import base64
import binascii
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The label of Argo CD's cluster Secrets and its value are discovery's, which reads them.
from fleetwatch.discovery.secrets import ARGOCD_CLUSTER as SECRET_TYPE_CLUSTER
from fleetwatch.discovery.secrets import ARGOCD_LABEL as SECRET_TYPE_LABEL
from fleetwatch.kube.objects import owners_of, slim
from reactor.cd.objects import ARGOCD, MARK, OWNER_MANAGERS, SKIP_RECONCILE, CdKind
from reactor.cd.objects import parse_bool as _parse_bool
from reactor.cd.rules import Decision, Observed, decide, secret_view
from reactor.cd.targets import ClusterIndex
from reactor.statemachine import Status
from reactor.store import KnownCluster, MirroredApp

SELECTOR = f"{SECRET_TYPE_LABEL}={SECRET_TYPE_CLUSTER}"
_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations")

CLUSTER_SECRET = CdKind(
    ARGOCD, "Secret", "", "v1", "secrets", ("metadata", "annotations", SKIP_RECONCILE)
)


@dataclass(frozen=True, slots=True)
class ClusterSecret:
    """An Argo CD cluster Secret, as the rules need it."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    #: its ``name`` key: Argo CD's name of the cluster (None when absent or unreadable)
    argocd_name: str | None
    paused: bool
    mark: str | None = None
    resumed_by_owner: bool = False

    @property
    def kind(self) -> CdKind:
        return CLUSTER_SECRET

    @property
    def ref(self) -> str:
        return f"secret://{self.namespace}/{self.name}"

    @property
    def key(self) -> str:
        """Its name in logs and the actuator's books: ``argocd:Secret/NAMESPACE/NAME``."""
        return f"{ARGOCD}:Secret/{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return CLUSTER_SECRET.path(self.namespace, self.name)

    @property
    def observed(self) -> Observed:
        return Observed(self.paused, self.mark, self.resumed_by_owner)


def is_cluster_secret(obj: Mapping[str, Any]) -> bool:
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return (
        obj.get("apiVersion") == "v1"
        and obj.get("kind") == "Secret"
        and isinstance(labels, Mapping)
        and labels.get(SECRET_TYPE_LABEL) == SECRET_TYPE_CLUSTER
    )


def kept(obj: dict[str, Any]) -> dict[str, Any]:
    """What the informer keeps of a cluster Secret (``fleetwatch.kube.objects.slim``): its
    identity, labels and annotations, the owners of the annotation, and of its data the
    ``name`` key only (no credential)."""
    out = slim(
        obj,
        owners_of_field=CLUSTER_SECRET.pause_field,
        metadata_keys=_METADATA,
        data_keys=("name",),
    )
    return {**out, "apiVersion": "v1", "kind": "Secret"}


def read_cluster_secret(obj: Mapping[str, Any]) -> ClusterSecret | None:
    """The Secret as the rules see it; None for anything else."""
    if not is_cluster_secret(obj):
        return None
    metadata = obj["metadata"]
    namespace, name, uid = (metadata.get(k) for k in ("namespace", "name", "uid"))
    if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str)):
        return None
    if not (namespace and name and uid):
        return None
    annotations = metadata.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    paused = _parse_bool(annotations.get(SKIP_RECONCILE))
    mark = annotations.get(MARK)
    owners = () if paused else owners_of(metadata, CLUSTER_SECRET.pause_field)
    return ClusterSecret(
        namespace=namespace,
        name=name,
        uid=uid,
        resource_version=str(metadata.get("resourceVersion") or ""),
        argocd_name=_name_key(obj.get("data")),
        paused=paused,
        mark=mark if isinstance(mark, str) else None,
        resumed_by_owner=bool(owners) and all(o in OWNER_MANAGERS for o in owners),
    )


def _name_key(data: object) -> str | None:
    value = data.get("name") if isinstance(data, Mapping) else None
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode() or None
    except (binascii.Error, UnicodeDecodeError):
        return None


def cluster_of(secret: ClusterSecret, index: ClusterIndex) -> str | None:
    """The store's cluster this Secret is Argo CD's record of (module docstring)."""
    by_ref = index.by_ref.get(secret.ref, ())
    if len(by_ref) == 1:
        return by_ref[0]
    if secret.argocd_name is not None and secret.argocd_name in index.keyless:
        return secret.argocd_name
    return None


@dataclass(frozen=True, slots=True)
class SecretDecision:
    """What to do with one cluster Secret."""

    secret: ClusterSecret
    cluster: str
    decision: Decision
    #: (app id, outage id): the cluster's Applications that leave the outage first (a
    #: person resumed the Secret during it)
    leaving: tuple[tuple[int, int], ...] = ()


def decide_secrets(
    secrets: Iterable[ClusterSecret],
    clusters: Iterable[KnownCluster],
    apps: Iterable[MirroredApp],
) -> tuple[list[SecretDecision], dict[str, str]]:
    """Each Secret's decision, and the Secrets that name no cluster (key -> why)."""
    clusters = list(clusters)
    index = ClusterIndex.of(clusters)
    known = {c.name: c for c in clusters}
    applications: dict[str, list[MirroredApp]] = defaultdict(list)
    for app in apps:
        if app.source == ARGOCD:
            applications[app.cluster].append(app)
    decisions: list[SecretDecision] = []
    unresolved: dict[str, str] = {}
    for secret in secrets:
        name = cluster_of(secret, index)
        cluster = known.get(name) if name is not None else None
        if cluster is None:
            unresolved[secret.key] = "no cluster discovered from this Argo CD cluster Secret"
            continue
        mine = applications.get(cluster.name, [])
        status = cluster.status if cluster.status is not None else Status.UNKNOWN
        view = secret_view(status, cluster.outage_id, ((a.status, a.outage_id) for a in mine))
        decision = decide(view, secret.observed)
        leaving: tuple[tuple[int, int], ...] = ()
        if decision.leave_outage is not None:
            outage = decision.leave_outage
            leaving = tuple((a.id, outage) for a in mine if a.outage_id == outage)
        decisions.append(SecretDecision(secret, cluster.name, decision, leaving))
    return decisions, unresolved
