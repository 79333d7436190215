"""The demo's management cluster: its clusters' Secrets and a few Flux and Argo CD objects.

``fleetwatch demo`` runs a stand-in management cluster beside the workload fleet
(``fleetwatch.standin.management``, in a child process) and seeds it with
:func:`cluster_secrets` and :func:`demo_objects`:

- **a Cluster API kubeconfig Secret per demo cluster** (``NAME/NAME-kubeconfig``, type
  ``cluster.x-k8s.io/secret``, the kubeconfig in ``value``), which the Flux objects name
  (``spec.kubeConfig.secretRef``, a Secret of their own namespace), and **an Argo CD
  cluster Secret** (``argocd/cluster-NAME``, label ``argocd.argoproj.io/secret-type:
  cluster``, keys ``name``, ``server`` and ``config``) of each cluster that has
  Applications: Argo CD resolves ``destination.name`` against its own cluster Secrets
  only, so a platform team running both keeps both Secrets of such a cluster, at one
  server. The exporter and the reactor discover the clusters from these
  (``--discovery.kubernetes``), not from files: discovery keeps one cluster of one name,
  Argo CD's Secret where there is one (``argocd`` sorts first), and sets Cluster API's
  aside as its alias (``fleetwatch.discovery.merge``), through which the Flux objects still resolve.
- **Flux and Argo CD objects of those clusters** (:data:`EXTRAS`), shaped as their CRDs
  (the stand-in validates them): a ``Kustomization`` ``apps`` in every cluster's
  namespace, and on the first two clusters a few more, one of them suspended by hand
  before the demo starts (fleetwatch must never resume it). The ``apps`` name their
  Secret without a key (Flux then reads ``value``), the others with ``key: value``, as
  Cluster API users write it: both resolve to the cluster.

:class:`ObjectReader` reads them back through the API, as ``kubectl get`` would, for
``demo down``/``up`` and the demo's watcher: each object's pause (``spec.suspend``, or
the annotation ``argocd.argoproj.io/skip-reconcile``) and fleetwatch's mark
(``fleetwatch.io/paused-by-outage``), and :func:`describe` says it in words.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleetwatch.discovery.secrets import ARGOCD_CLUSTER, ARGOCD_LABEL
from reactor.cd.objects import (
    APPLICATION,
    FLUX,
    HELMRELEASE,
    KINDS,
    KUSTOMIZATION,
    MARK,
    SUSPEND,
    CdKind,
    CdObject,
    app_name,
    kind_of,
    read_object,
)

ARGOCD_NAMESPACE = "argocd"
#: The key of a Cluster API kubeconfig Secret, which holds the kubeconfig.
CAPI_KEY = "value"
#: Flux's name for a Cluster API cluster's kubeconfig Secret: ``<cluster>-kubeconfig``.
SECRET_SUFFIX = "-kubeconfig"
#: Objects beyond every cluster's ``apps``: (kind, name, index of its cluster, paused by hand).
EXTRAS = (
    (KUSTOMIZATION.kind, "monitoring", 0, True),
    (APPLICATION.kind, "shop", 0, False),
    (HELMRELEASE.kind, "podinfo", 1, False),
    (APPLICATION.kind, "payments", 1, False),
)
#: fleetwatch's mark (``fleetwatch.io/paused-by-outage``) as the demo prints it.
MARK_SHORT = MARK.rpartition("/")[2]
GIT = {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def cluster_secret(cluster: str, kubeconfig: str) -> dict[str, Any]:
    """Cluster API's kubeconfig Secret of ``cluster``, in a namespace of its name."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "cluster.x-k8s.io/secret",
        "metadata": {
            "name": cluster + SECRET_SUFFIX,
            "namespace": cluster,
            "labels": {"cluster.x-k8s.io/cluster-name": cluster},
        },
        "data": {CAPI_KEY: _b64(kubeconfig)},
    }


def argocd_cluster_secret(cluster: str, kubeconfig: str) -> dict[str, Any]:
    """Argo CD's cluster Secret of ``cluster``: the server and credentials of the current
    context of ``kubeconfig``, in Argo CD's ``config`` JSON (``bearerToken``,
    ``tlsClientConfig`` with the PEM data base64-encoded as in a kubeconfig), as
    ``argocd cluster add`` or a declarative setup writes it."""
    doc = yaml.safe_load(kubeconfig)
    context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    server = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    tls: dict[str, Any] = {}
    for ours, theirs, entry in (
        ("caData", "certificate-authority-data", server),
        ("certData", "client-certificate-data", user),
        ("keyData", "client-key-data", user),
    ):
        if entry.get(theirs):
            tls[ours] = entry[theirs]
    if server.get("insecure-skip-tls-verify"):
        tls["insecure"] = True
    config: dict[str, Any] = {"tlsClientConfig": tls}
    if user.get("token"):
        config["bearerToken"] = user["token"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": f"cluster-{cluster}",
            "namespace": ARGOCD_NAMESPACE,
            "labels": {ARGOCD_LABEL: ARGOCD_CLUSTER},
        },
        "data": {
            "name": _b64(cluster),
            "server": _b64(str(server["server"])),
            "config": _b64(json.dumps(config)),
        },
    }


def flux_object(
    kind: str, cluster: str, name: str, suspended: bool = False, key: str | None = None
) -> dict[str, Any]:
    """A Kustomization or HelmRelease of ``cluster`` (in its namespace, through its Secret;
    ``key``: the key named, ``value`` as Cluster API users write it, or none: Flux's
    default, the same ``value``)."""
    spec: dict[str, Any] = {"interval": "10m"}
    if kind == KUSTOMIZATION.kind:
        spec |= {"path": f"./clusters/{name}", "prune": True, "sourceRef": GIT}
        api = KUSTOMIZATION
    else:
        repo = {"kind": "HelmRepository", "name": name, "namespace": "flux-system"}
        spec |= {"chart": {"spec": {"chart": name, "sourceRef": repo}}}
        api = HELMRELEASE
    ref = {"name": cluster + SECRET_SUFFIX} | ({} if key is None else {"key": key})
    spec["kubeConfig"] = {"secretRef": ref}
    if suspended:
        spec[SUSPEND] = True
    return {
        "apiVersion": f"{api.group}/{api.version}",
        "kind": kind,
        "metadata": {"name": name, "namespace": cluster},
        "spec": spec,
    }


def application(cluster: str, name: str) -> dict[str, Any]:
    """An Argo CD Application deploying to ``cluster`` (``destination.name``)."""
    return {
        "apiVersion": f"{APPLICATION.group}/{APPLICATION.version}",
        "kind": APPLICATION.kind,
        "metadata": {"name": name, "namespace": ARGOCD_NAMESPACE},
        "spec": {
            "project": "default",
            "source": {
                "repoURL": "https://git.example.com/fleet.git",
                "path": f"apps/{name}",
                "targetRevision": "HEAD",
            },
            "destination": {"name": cluster, "namespace": name},
        },
    }


def cluster_secrets(kubeconfigs: Mapping[str, str]) -> list[dict[str, Any]]:
    """One Cluster API Secret per cluster (``{name: kubeconfig text}``, in the demo's
    order), and Argo CD's of each that has Applications (module docstring)."""
    argocd = with_applications(list(kubeconfigs))
    return [cluster_secret(name, text) for name, text in kubeconfigs.items()] + [
        argocd_cluster_secret(name, text) for name, text in kubeconfigs.items() if name in argocd
    ]


def with_applications(clusters: list[str]) -> set[str]:
    """The demo's clusters that Applications of :data:`EXTRAS` deploy to."""
    return {
        clusters[index]
        for kind, _, index, _ in EXTRAS
        if kind == APPLICATION.kind and index < len(clusters)
    }


def demo_objects(clusters: list[str]) -> list[dict[str, Any]]:
    """The Flux and Argo CD objects of the demo's clusters (module docstring)."""
    objects = [flux_object(KUSTOMIZATION.kind, c, "apps") for c in clusters]
    for kind, name, index, held in EXTRAS:
        if index >= len(clusters):
            continue
        cluster = clusters[index]
        if kind == APPLICATION.kind:
            objects.append(application(cluster, name))
        else:  # named with Cluster API's key, as its users write it; the apps without
            objects.append(flux_object(kind, cluster, name, suspended=held, key=CAPI_KEY))
    return objects


def mirrored_name(obj: Mapping[str, Any]) -> str:
    """The name of the reactor's app that mirrors ``obj`` (one of :func:`demo_objects`)."""
    kind = kind_of(obj)
    assert kind is not None, obj
    return app_name(kind, obj["metadata"]["namespace"], obj["metadata"]["name"])


# --- reading them back ------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectState:
    """One object as ``demo down``/``up`` show it."""

    kind: str
    namespace: str
    name: str
    #: the demo cluster it deploys to (by the demo's naming), None if another
    cluster: str | None
    flux: bool
    paused: bool
    mark: str | None

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _state(obj: CdObject) -> ObjectState:
    dest = obj.destination
    cluster = dest.argocd_name
    if dest.secret_ref is not None:
        secret = dest.secret_ref.rpartition("/")[2]
        cluster = secret.removesuffix(SECRET_SUFFIX) if secret.endswith(SECRET_SUFFIX) else None
    return ObjectState(
        obj.kind.kind,
        obj.namespace,
        obj.name,
        cluster,
        obj.kind.source == FLUX,
        obj.paused,
        obj.mark,
    )


def describe(obj: ObjectState) -> str:
    """What the object is, in the words of its own fields."""
    field = SUSPEND if obj.flux else "skip-reconcile"
    if obj.paused and obj.mark is not None:
        return f"paused by fleetwatch ({field}: true, {MARK_SHORT}: {obj.mark})"
    if obj.paused:
        return f"paused by hand ({field}: true, no mark: fleetwatch leaves it)"
    state = f"{field}: false" if obj.flux else f"no {field}"
    if obj.mark is not None:
        return f"running ({state}, still marked {obj.mark})"
    return f"running ({state}, no mark)"


def brief(obj: ObjectState) -> str:
    """:func:`describe` in a few words, for the demo's running account."""
    if obj.paused:
        return f"paused by outage {obj.mark}" if obj.mark is not None else "paused by hand"
    return "running"


class ObjectReader:
    """The demo's CD objects, listed through the management cluster's API (its kubeconfig:
    the server, its CA and a bearer token, as the stand-in writes it)."""

    def __init__(self, kubeconfig: Path, timeout: float = 5.0) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.server = str(cluster["server"]).rstrip("/")
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self._context = ssl.create_default_context(cadata=ca)
        self._token = str(config["users"][0]["user"]["token"])
        self.timeout = timeout

    def _list(self, kind: CdKind) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            self.server + kind.path(),
            headers={"Authorization": f"Bearer {self._token}", "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout, context=self._context) as resp:
            items: list[dict[str, Any]] = json.load(resp)["items"]
        for item in items:  # a list's items may leave out their kind (core kinds do)
            item.setdefault("apiVersion", f"{kind.group}/{kind.version}")
            item.setdefault("kind", kind.kind)
        return items

    def objects(self) -> list[ObjectState]:
        """Every Flux Kustomization and HelmRelease and Argo CD Application, sorted."""
        found: list[ObjectState] = []
        for kind in KINDS:
            for item in self._list(kind):
                read = read_object(item)
                if isinstance(read, CdObject):
                    found.append(_state(read))
        return sorted(found, key=lambda o: (o.cluster or "", o.flux is False, o.label))

    def of(self, cluster: str) -> list[ObjectState]:
        return [o for o in self.objects() if o.cluster == cluster]

    def wait(
        self,
        cluster: str,
        done: Callable[[ObjectState], bool],
        names: Iterable[str],
        timeout: float,
    ) -> tuple[list[ObjectState], bool]:
        """Poll ``cluster``'s objects until those labelled ``names`` are all ``done``;
        (the objects last read, whether they got there before ``timeout``)."""
        wanted = set(names)
        deadline = time.monotonic() + timeout
        while True:
            found = self.of(cluster)
            if all(done(o) for o in found if o.label in wanted):
                return found, True
            if time.monotonic() >= deadline:
                return found, False
            time.sleep(0.2)


def paused_by_fleetwatch(obj: ObjectState) -> bool:
    return obj.paused and obj.mark is not None


def resumed(obj: ObjectState) -> bool:
    return not obj.paused and obj.mark is None
