"""A Flux or Argo CD object of the management cluster, read as the cascade needs it.

The reactor mirrors three kinds (:data:`KINDS`), as the API returns them (JSON dicts):

==================================  ==============================  ===========================
kind                                deploys to                      paused when
==================================  ==============================  ===========================
Flux ``Kustomization`` (``v1``),    ``spec.kubeConfig.secretRef``:  ``spec.suspend: true``
``HelmRelease`` (``v2``)            a Secret in the object's own
                                    namespace (``name``, ``key``)
Argo CD ``Application``             ``spec.destination.name``, or   annotation
(``v1alpha1``)                      ``.server``: a cluster of an    ``argocd.argoproj.io/
                                    Argo CD cluster Secret          skip-reconcile`` true
==================================  ==============================  ===========================

:func:`read_object` turns one into a :class:`CdObject`: its identity (kind, namespace,
name, ``uid``, ``resourceVersion``), where it deploys (:class:`Destination`, resolved to a
cluster of the store by ``reactor.cd.targets``), whether it is paused, and fleetwatch's
mark, the annotation ``fleetwatch.io/paused-by-outage: <outage id>`` that every object
fleetwatch paused carries until it is resumed.

**Who resumed it.** The rules must tell an object resumed by a person (their choice stands)
from one whose owner re-applied it (a parent Kustomization, an ApplicationSet: paused
again while the outage lasts). An owner that replaces the whole object drops the pause
and the mark together; but Flux's forced server-side apply takes back ``spec.suspend``
and leaves our annotation, which its manifest does not name. So when an object is not
paused, :attr:`CdObject.resumed_by_owner` says whether the field that held the pause is
owned (``metadata.managedFields``) only by the controllers that apply objects
(:data:`OWNER_MANAGERS`); a person's ``kubectl`` or ``flux resume`` is not one of them.

**Names.** A mirrored app is named ``SOURCE:KIND/NAMESPACE/NAME`` (:func:`app_name`,
e.g. ``flux:Kustomization/flux-system/apps``): unique per object, stable while it moves
between clusters, and unambiguous, as Kubernetes names hold neither ``:`` nor ``/``. The
API refuses to create an app whose name starts with one of
``reactor.store.MIRRORED_PREFIXES``, so an API row and a mirrored object never claim the
same name. A namespace or name that breaks ``fleetwatch.common.names``' rule (a control character:
an API server refuses them, a stand-in or a proxy may not) makes the object
:class:`Unreadable`, named escaped: it is never stored, and no log line carries it raw.

Pure: dicts in, plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwatch.common.names import char_flaw, escaped, name_problem
from fleetwatch.kube.objects import owners_of
from reactor.store import MIRRORED_SOURCES

FLUX, ARGOCD = MIRRORED_SOURCES

#: fleetwatch's mark on every object it paused: the id of the outage that paused it.
MARK = "fleetwatch.io/paused-by-outage"
#: Flux stops reconciling a Kustomization or HelmRelease whose ``spec`` has it true: the
#: pause's field, read (:func:`read_object`), written (``reactor.cd.patches``) and looked
#: for among ``managedFields`` (:attr:`CdKind.pause_field`) by this one name.
SUSPEND = "suspend"
#: Argo CD stops all processing of an Application that carries it (alpha since 2.7).
SKIP_RECONCILE = "argocd.argoproj.io/skip-reconcile"
#: A new value asks Flux to reconcile at once: what ``flux reconcile`` writes (flux2
#: ``cmd/flux/reconcile.go``); ``flux resume`` only sets ``spec.suspend: false``.
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"

#: Field managers of the controllers that apply CD objects from their source: a pause
#: they undid is re-applied while the outage lasts (module docstring).
OWNER_MANAGERS = frozenset(
    {
        "kustomize-controller",
        "helm-controller",
        "argocd-controller",
        "argocd-application-controller",
        "argocd-applicationset-controller",
    }
)


@dataclass(frozen=True, slots=True)
class CdKind:
    """One mirrored resource: its source, kind and where the API serves it."""

    source: str
    kind: str
    group: str
    version: str
    plural: str
    #: the path of the field that holds the pause, for ``managedFields``
    pause_field: tuple[str, ...]

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The collection (all namespaces, or one), or one object's path."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is None:
            return f"{base}/{self.plural}"
        path = f"{base}/namespaces/{namespace}/{self.plural}"
        return path if name is None else f"{path}/{name}"


KUSTOMIZATION = CdKind(
    FLUX,
    "Kustomization",
    "kustomize.toolkit.fluxcd.io",
    "v1",
    "kustomizations",
    ("spec", SUSPEND),
)
HELMRELEASE = CdKind(
    FLUX, "HelmRelease", "helm.toolkit.fluxcd.io", "v2", "helmreleases", ("spec", SUSPEND)
)
APPLICATION = CdKind(
    ARGOCD,
    "Application",
    "argoproj.io",
    "v1alpha1",
    "applications",
    ("metadata", "annotations", SKIP_RECONCILE),
)
KINDS = (KUSTOMIZATION, HELMRELEASE, APPLICATION)
_BY_KIND = {(k.group, k.kind): k for k in KINDS}


def app_name(kind: CdKind, namespace: str, name: str) -> str:
    """The mirrored app's name: ``SOURCE:KIND/NAMESPACE/NAME``."""
    return f"{kind.source}:{kind.kind}/{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class Destination:
    """Where an object deploys, as it names it (resolved by ``reactor.cd.targets``).

    Flux: its kubeConfig Secret, ``secret://NAMESPACE/NAME`` (the object's own namespace),
    and the key it names (None: Flux's defaults, ``value`` then ``value.yaml``). Argo CD:
    the destination's ``name`` or ``server``.
    """

    secret_ref: str | None = None
    secret_key: str | None = None
    argocd_name: str | None = None
    argocd_server: str | None = None

    def __str__(self) -> str:
        """Escaped (``fleetwatch.common.names``): the object's spec says it, and logs and the API
        repeat it."""
        if self.secret_ref is not None:
            return f"Secret {escaped(self.secret_ref)}"
        if self.argocd_name is not None:
            return f"Argo CD cluster {self.argocd_name!r}"
        return f"Argo CD server {escaped(str(self.argocd_server))}"


@dataclass(frozen=True, slots=True)
class CdObject:
    """One Flux or Argo CD object, as the rules and the mirror need it."""

    kind: CdKind
    namespace: str
    name: str
    uid: str
    resource_version: str
    destination: Destination
    paused: bool
    #: fleetwatch's mark (the outage id it names, as written), None when absent
    mark: str | None = None
    #: not paused, and the pause's field is owned by controllers only (module docstring)
    resumed_by_owner: bool = False

    @property
    def app_name(self) -> str:
        return app_name(self.kind, self.namespace, self.name)

    @property
    def path(self) -> str:
        return self.kind.path(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An object of a mirrored kind that names no cluster fleetwatch can find, and why."""

    app_name: str
    reason: str


def read_object(obj: Mapping[str, Any]) -> CdObject | Unreadable | None:
    """The object as the cascade sees it; None when it is not one of ours (another kind,
    no identity, or a Flux object that deploys to the management cluster itself)."""
    kind = kind_of(obj)
    metadata = obj.get("metadata")
    if kind is None or not isinstance(metadata, Mapping):
        return None
    namespace, name, uid = (metadata.get(k) for k in ("namespace", "name", "uid"))
    if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str)):
        return None
    if not (namespace and name and uid):
        return None
    refused = name_problem(namespace, "its namespace", show=False) or name_problem(
        name, "its name", show=False
    )
    if refused is not None:
        return Unreadable(escaped(app_name(kind, namespace, name)), refused)
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    annotations = metadata.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    if kind.source == FLUX:
        found = _flux_destination(spec, namespace)
        paused = spec.get(SUSPEND) is True
    else:
        found = _argocd_destination(spec)
        paused = parse_bool(annotations.get(SKIP_RECONCILE))
    if found is None:
        return None
    if isinstance(found, str):
        return Unreadable(app_name(kind, namespace, name), found)
    mark = annotations.get(MARK)
    owners = () if paused else owners_of(metadata, kind.pause_field)
    return CdObject(
        kind=kind,
        namespace=namespace,
        name=name,
        uid=uid,
        resource_version=str(metadata.get("resourceVersion") or ""),
        destination=found,
        paused=paused,
        mark=mark if isinstance(mark, str) else None,
        resumed_by_owner=bool(owners) and all(o in OWNER_MANAGERS for o in owners),
    )


def kind_of(obj: Mapping[str, Any]) -> CdKind | None:
    """The mirrored kind ``obj`` is (by its API group and kind), None for any other."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return _BY_KIND.get((api_version.rpartition("/")[0], kind))


def _flux_destination(spec: Mapping[str, Any], namespace: str) -> Destination | str | None:
    """Where a Flux object deploys; None: to the cluster Flux runs in; str: why unknown."""
    kube_config = spec.get("kubeConfig")
    if kube_config is None:
        return None
    if not isinstance(kube_config, Mapping):
        return "spec.kubeConfig is not an object"
    ref = kube_config.get("secretRef")
    if not isinstance(ref, Mapping):
        # configMapRef: a cloud provider's workload identity, no Secret discovery reads
        return "spec.kubeConfig names no secretRef (only Secrets name clusters fleetwatch knows)"
    name, key = ref.get("name"), ref.get("key")
    if not isinstance(name, str) or not name:
        return "spec.kubeConfig.secretRef has no name"
    if key is not None and not isinstance(key, str):
        return "spec.kubeConfig.secretRef.key is not a string"
    unprintable = char_flaw(name) or char_flaw(key or "")
    if unprintable is not None:  # no Secret discovery reads has such a name or key
        return f"spec.kubeConfig.secretRef {unprintable}: no Secret has such a name or key"
    return Destination(secret_ref=f"secret://{namespace}/{name}", secret_key=key or None)


def _argocd_destination(spec: Mapping[str, Any]) -> Destination | str:
    destination = spec.get("destination")
    if not isinstance(destination, Mapping):
        return "spec.destination is missing"
    name, server = destination.get("name"), destination.get("server")
    name = name if isinstance(name, str) and name else None
    server = server.rstrip("/") if isinstance(server, str) and server else None
    if name is not None and server is not None:
        return "spec.destination has both name and server (Argo CD refuses it)"
    if name is None and server is None:
        return "spec.destination names no cluster (neither name nor server)"
    unprintable = char_flaw(name or server or "")
    if unprintable is not None:  # discovery keeps no cluster so named or served
        return f"spec.destination.{'name' if name else 'server'} {unprintable}"
    return Destination(argocd_name=name, argocd_server=server)


def parse_bool(value: object) -> bool:
    """True as Go's ``strconv.ParseBool`` reads it (how Argo CD reads the annotation)."""
    return isinstance(value, str) and value in ("1", "t", "T", "true", "TRUE", "True")
