"""The CD integration's test fleet on the stand-in management cluster, and the steps its
tests share: a reactor's CD settings, clusters c1 and c2 added as discovery names them,
the state of a seeded object.

Before, the fleet lived in ``test_cd_live.py`` and the other CD tests imported it from
there (a test module as a library, found through the folder on ``sys.path``); the
``start`` fixture built on it is in ``tests/reactor/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry

from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor.cd.objects import MARK, SKIP_RECONCILE
from reactor.cd.settings import CdSettings
from tests.helpers.reactor_helpers import notify
from tests.helpers.reactor_payloads import OFFLINE, alert

KS = "kustomize.toolkit.fluxcd.io/v1"
HR = "helm.toolkit.fluxcd.io/v2"
APP = "argoproj.io/v1alpha1"
SERVER = {"c1": "https://c1.test:6443", "c2": "https://c2.test:6443"}

Start = Callable[..., Awaitable[Any]]


def kustomization(name: str, cluster: str | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "interval": "10m",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        **spec,
    }
    if cluster is not None:
        body["kubeConfig"] = {"secretRef": {"name": f"{cluster}-kubeconfig"}}
    meta = {"name": name, "namespace": "flux-system"}
    return {"apiVersion": KS, "kind": "Kustomization", "metadata": meta, "spec": body}


def helmrelease(name: str, cluster: str) -> dict[str, Any]:
    spec = {
        "interval": "5m",
        "chart": {"spec": {"chart": name, "sourceRef": {"kind": "HelmRepository", "name": "r"}}},
        "kubeConfig": {"secretRef": {"name": f"{cluster}-kubeconfig"}},
    }
    meta = {"name": name, "namespace": "flux-system"}
    return {"apiVersion": HR, "kind": "HelmRelease", "metadata": meta, "spec": spec}


def application(
    app: str, annotations: dict[str, str] | None = None, **destination: str
) -> dict[str, Any]:
    spec = {"project": "default", "destination": {"namespace": app, **destination}}
    meta: dict[str, Any] = {"name": app, "namespace": "argocd"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": APP, "kind": "Application", "metadata": meta, "spec": spec}


FLEET = [
    kustomization("apps", "c1"),
    kustomization("held", "c1", suspend=True),  # paused by hand before any outage
    kustomization("manual", "c1"),
    helmrelease("podinfo", "c1"),
    kustomization("other", "c2"),
    kustomization("local", None),  # deploys to the management cluster: not an app
    application("guestbook", name="c1"),
    application("web", server=SERVER["c1"]),
    application("away", name="c2"),
]
OBJECTS = {obj["metadata"]["name"]: obj for obj in FLEET}
#: The objects an outage of c1 pauses ("held" is paused by hand already).
C1_PAUSED = ("apps", "manual", "podinfo", "guestbook", "web")


def flux_ref(name: str) -> str:
    """The cluster's Secret ref as discovery names a Flux kubeconfig Secret."""
    return f"secret://flux-system/{name}-kubeconfig"


def cd_settings(kubeconfig: str, **cd: Any) -> CdSettings:
    """``--cd.flux --cd.argocd`` on ``kubeconfig`` with a short informer backoff; ``cd``
    overrides any of them."""
    fields: dict[str, Any] = {
        "flux": True,
        "argocd": True,
        "kubeconfig": kubeconfig,
        "informer": InformerSettings(backoff_initial=0.05, backoff_max=0.5),
    }
    return CdSettings(**{**fields, **cd})


async def add_clusters(client: Any, ref: Callable[[str], str] = flux_ref) -> None:
    """c1 and c2 through the API, each with the Secret ref discovery would give it."""
    for name in ("c1", "c2"):
        body = {"name": name, "endpoint": SERVER[name], "kubeconfig_secret_ref": ref(name)}
        assert (await client.post("/clusters", json=body)).status == 201


def obj(mgmt: ManagementCluster, name: str) -> dict[str, Any]:
    seeded = OBJECTS[name]
    kind = BY_API_KIND[(seeded["apiVersion"], seeded["kind"])]
    found: dict[str, Any] = mgmt.state.store.get(kind, seeded["metadata"]["namespace"], name)
    return found


def paused_and_mark(found: dict[str, Any]) -> tuple[bool, str | None]:
    """(paused, fleetwatch's mark) of a Flux or Argo CD object."""
    notes = found["metadata"].get("annotations") or {}
    if found["kind"] == "Application":
        return notes.get(SKIP_RECONCILE) == "true", notes.get(MARK)
    return found["spec"].get("suspend") is True, notes.get(MARK)


def state(mgmt: ManagementCluster, name: str) -> tuple[bool, str | None]:
    """(paused, fleetwatch's mark) of an object, read from the stand-in's store."""
    return paused_and_mark(obj(mgmt, name))


def patches(mgmt: ManagementCluster) -> dict[str, int]:
    return {k: n for k, n in mgmt.counts().items() if k.startswith("patch ")}


def c1_paused(mgmt: ManagementCluster) -> bool:
    """Every object an outage of c1 pauses is paused, with fleetwatch's mark."""
    return all(state(mgmt, n)[0] and state(mgmt, n)[1] for n in C1_PAUSED)


def c1_resumed(mgmt: ManagementCluster) -> bool:
    """Every object an outage of c1 pauses runs again, unmarked."""
    return all(state(mgmt, n) == (False, None) for n in C1_PAUSED)


async def c1_offline(
    start: Start,
    mgmt: ManagementCluster,
    resync_interval_s: float = 1.0,
    failing_patch_of: str | None = None,
) -> tuple[Any, CollectorRegistry]:
    """A reactor from ``start`` told c1 is OFFLINE, and its registry; with
    ``failing_patch_of``, the stand-in fails its first patch of that resource (a 500)."""
    registry = CollectorRegistry()
    client = await start(registry=registry, resync_interval_s=resync_interval_s)
    if failing_patch_of is not None:
        mgmt.arm_fault(kind="error", count=1, verb="patch", resource=failing_patch_of)
    await notify(client, alert(OFFLINE, "c1", 5))
    return client, registry
