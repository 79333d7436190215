"""The list+watch of the mirrored kinds: ``fleetwatch.kube.informer``'s reflectors, on CRDs.

One :class:`CdWatch` per kind turned on (``--cd.flux``: Kustomizations and HelmReleases;
``--cd.argocd``: Applications), cluster-wide: an object's destination is in its spec, which
no selector can filter on, so every object is listed and ``reactor.cd.objects`` keeps those
that deploy to a remote cluster. Each kind's list+watch is a ``fleetwatch.kube.reflector``, the
one implementation the Secrets use too: it pages, resumes, relists after ``410 Gone``,
ignores an event older than the object held, and waits client-go's backoff (0.8 s doubling
to 30 s, with jitter) after any failed round, so a struggling API server is not hammered.

What the informer keeps of an object (:func:`stored`) is what it keeps of a Secret
(``fleetwatch.kube.objects.slim``: no ``managedFields``, no ``kubectl apply`` copy), but for one
thing the rules need: who owns the field that holds the pause, kept as a one-field
``managedFields`` per owner (``reactor.cd.objects`` reads it to tell an owner's revert
from a person's resume).

With ``--cd.argocd.pause cluster-secret``, Argo CD's cluster Secrets too (by their label,
in discovery's namespaces), of which the informer keeps no credential
(``reactor.cd.clustersecrets.kept``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetwatch.discovery.kubecreds import from_kubeconfig, load_credentials
from fleetwatch.kube.kubeauth import ApiCredentials
from fleetwatch.kube.objects import slim
from reactor.cd import clustersecrets
from reactor.cd.clustersecrets import CLUSTER_SECRET, SELECTOR, is_cluster_secret
from reactor.cd.objects import CdKind, kind_of
from reactor.cd.settings import CdSettings


@dataclass(frozen=True)
class CdWatch:
    """One kind's list+watch (``fleetwatch.kube.informer.Watched``)."""

    cd_kind: CdKind
    namespace: str | None = None
    label_selector: str = ""
    field_selector: str = ""

    @property
    def kind(self) -> str:
        return self.cd_kind.plural

    @property
    def path(self) -> str:
        return self.cd_kind.path(self.namespace)

    def __str__(self) -> str:
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        selected = f" ({self.label_selector})" if self.label_selector else ""
        return f"{self.cd_kind.kind} objects{selected} in {where}"


def cd_watches(settings: CdSettings) -> list[CdWatch]:
    watches = [CdWatch(kind) for kind in settings.kinds]
    if settings.pause_cluster_secrets:
        namespaces: tuple[str | None, ...] = settings.secret_namespaces or (None,)
        watches += [CdWatch(CLUSTER_SECRET, ns, label_selector=SELECTOR) for ns in namespaces]
    return watches


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` slimmed as the informer keeps Secrets, with the owners of its pause field."""
    # A list's items of a built-in kind come without apiVersion and kind (a watch event's
    # object has them, custom resources keep theirs): of the watches here, only the cluster
    # Secrets' send such items, which must be read, and lose their credentials, alike.
    typed = obj if "kind" in obj else {"apiVersion": "v1", "kind": "Secret", **obj}
    if is_cluster_secret(typed):
        return clustersecrets.kept(typed)
    kind = kind_of(obj)
    return slim(obj, owners_of_field=kind.pause_field if kind is not None else None)


def credentials_of(settings: CdSettings) -> ApiCredentials:
    """The management cluster's credentials (raises ``KubeAuthError`` with the reason):
    ``--cd.kubeconfig``, else in-cluster, else ``KUBECONFIG``."""
    if settings.kubeconfig:
        return from_kubeconfig([Path(settings.kubeconfig).absolute()], "--cd.kubeconfig")
    return load_credentials(None, dict(os.environ))
