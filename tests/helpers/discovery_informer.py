"""Secrets of each kind, and an informer against the management stand-in, for the live tests.

Every credential in these Secrets is a sentinel: a test that finds one in a log line, an
exception or a ``repr`` has found a leak.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import yaml

from fleetwatch.discovery.kubecreds import from_kubeconfig
from fleetwatch.discovery.secretwatch import WatchSpec, watch_specs
from fleetwatch.kube.informer import Informer, InformerSettings
from fleetwatch.kube.kubeapi import KubeApi
from fleetwatch.kube.kubeauth import ApiCredentials
from fleetwatch.standin.management import ManagementCluster

SENTINEL = "SENTINEL-credential-7f3a9c"

#: Fast enough for tests: small pages (paging exercised), short backoff.
FAST = InformerSettings(
    page_size=2, watch_seconds=(30.0, 30.0), backoff_initial=0.05, backoff_max=0.2
)


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def api_secret(
    name: str,
    namespace: str,
    labels: dict[str, str] | None = None,
    data: dict[str, str | bytes] | None = None,
    *,
    type_: str | None = None,
    rv: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A Secret as the API returns it, ``data`` base64-encoded here; the labels, the type,
    the resourceVersion and the uid only where given."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    if rv is not None:
        meta["resourceVersion"] = rv
    if uid is not None:
        meta["uid"] = uid
    found: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": meta}
    if type_ is not None:
        found["type"] = type_
    found["data"] = {k: b64(v) for k, v in (data or {}).items()}
    return found


ARGOCD_CLUSTER = {"argocd.argoproj.io/secret-type": "cluster"}


def argocd_cluster(
    name: str, server: str, config: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """An Argo CD cluster Secret (namespace argocd) with its ``config`` and extra labels."""
    data: dict[str, str | bytes] = {"name": name, "server": server, "config": json.dumps(config)}
    return api_secret(f"cluster-{name}", "argocd", {**ARGOCD_CLUSTER, **(labels or {})}, data)


def argocd_secret(
    name: str, server: str = "https://127.0.0.11:6443", token: str = SENTINEL
) -> dict[str, Any]:
    config = {"bearerToken": f"{token}-{name}", "tlsClientConfig": {"insecure": True}}
    return argocd_cluster(name, server, config)


def kubeconfig_text(context: str, server: str = "https://127.0.0.12:6443") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": server}}],
            "users": [{"name": context, "user": {"token": f"{SENTINEL}-{context}"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        }
    )


def capi_secret(
    cluster: str, namespace: str = "fleet", suffix: str = "kubeconfig"
) -> dict[str, Any]:
    return api_secret(
        f"{cluster}-{suffix}",
        namespace,
        {"cluster.x-k8s.io/cluster-name": cluster},
        {"value": kubeconfig_text(cluster)},
        type_="cluster.x-k8s.io/secret",
    )


def labelled_secret(name: str, contexts: Sequence[str], namespace: str = "teams") -> dict[str, Any]:
    data: dict[str, str | bytes] = {f"{c}.yaml": kubeconfig_text(c) for c in contexts}
    return api_secret(name, namespace, {"fleetwatch.io/kubeconfig": "true"}, data)


def plain_secret(name: str, namespace: str = "teams") -> dict[str, Any]:
    return api_secret(name, namespace, data={"value": kubeconfig_text("unlabelled")})


def names(informer: Informer) -> set[str]:
    return {obj["metadata"]["name"] for obj in informer.objects().values()}


async def until(predicate: Callable[[], bool], within: float = 10.0, what: str = "") -> None:
    """Poll ``predicate`` until true, failing past ``within`` seconds."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what or predicate}")
        await asyncio.sleep(0.02)


def admin_credentials(mgmt: ManagementCluster) -> ApiCredentials:
    return from_kubeconfig([mgmt.kubeconfig], "test")


@asynccontextmanager
async def running(
    mgmt: ManagementCluster,
    specs: Sequence[WatchSpec] | None = None,
    credentials: ApiCredentials | None = None,
    settings: InformerSettings = FAST,
) -> AsyncIterator[Informer]:
    """An informer (all three kinds cluster-wide by default) running against ``mgmt``."""
    specs = watch_specs("fleetwatch.io/kubeconfig") if specs is None else specs
    async with (
        KubeApi(credentials or admin_credentials(mgmt)) as api,
        Informer(api, specs, settings) as informer,
    ):
        yield informer
