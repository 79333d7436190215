"""What ``fleetwatch demo`` seeds its management cluster with resolves as the reactor
resolves it: pure, from the Secrets as discovery reads them to each object's cluster.

The demo's Applications name their clusters by ``destination.name``, which Argo CD (and
so the reactor) resolves against Argo CD's cluster Secrets only: the demo seeds one for
each cluster that has Applications, beside Cluster API's Secret the Flux objects name.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from fleetwatch.cli import demo_cd
from fleetwatch.discovery.clusters import Discovery
from fleetwatch.discovery.merge import merge
from fleetwatch.discovery.secrets import SecretClusters, read_secret
from reactor.cd.objects import CdObject, read_object
from reactor.cd.targets import ClusterIndex, Unresolved
from reactor.store import KnownCluster

CLUSTERS = ["demo-001", "demo-002", "demo-003"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(cluster: str, index: int) -> str:
    """A kubeconfig shaped as the stand-in fleet writes it: CA data, a client certificate
    and key (placeholders: nothing here is dialled), on 127.0.0.1."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": cluster,
                    "cluster": {
                        "server": f"https://127.0.0.1:{7001 + index}",
                        "certificate-authority-data": b64(f"ca of {cluster}"),
                    },
                }
            ],
            "users": [
                {
                    "name": f"{cluster}-admin",
                    "user": {
                        "client-certificate-data": b64(f"cert of {cluster}"),
                        "client-key-data": b64(f"key of {cluster}"),
                    },
                }
            ],
            "contexts": [
                {"name": cluster, "context": {"cluster": cluster, "user": f"{cluster}-admin"}}
            ],
            "current-context": cluster,
        }
    )


def served(obj: dict[str, Any], uid: int) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "uid": f"u{uid}", "resourceVersion": "1"}}


def seeded() -> tuple[list[SecretClusters], list[dict[str, Any]]]:
    kubeconfigs = {c: kubeconfig(c, i) for i, c in enumerate(CLUSTERS)}
    secrets = [served(s, i) for i, s in enumerate(demo_cd.cluster_secrets(kubeconfigs))]
    reads = [read_secret(s) for s in secrets]
    assert all(r is not None and r.problems == () for r in reads), reads
    objects = [served(o, 100 + i) for i, o in enumerate(demo_cd.demo_objects(CLUSTERS))]
    return [r for r in reads if r is not None], objects


def test_clusters_with_applications_have_argo_cds_secret_too_and_one_cluster_each() -> None:
    reads, _ = seeded()
    assert sorted(r.ref for r in reads if r.kind == "argocd") == [
        "secret://argocd/cluster-demo-001",
        "secret://argocd/cluster-demo-002",
    ]
    merged = merge(Discovery((), ()), reads)
    refs = {c.name: c.kubeconfig_secret_ref for c in merged.discovery.clusters}
    assert refs == {
        "demo-001": "secret://argocd/cluster-demo-001",
        "demo-002": "secret://argocd/cluster-demo-002",
        "demo-003": "secret://demo-003/demo-003-kubeconfig",
    }
    assert merged.aliases == {
        "secret://demo-001/demo-001-kubeconfig": "demo-001",
        "secret://demo-002/demo-002-kubeconfig": "demo-002",
    }
    # Argo CD's Secret says what Cluster API's kubeconfig says: one cluster, same access.
    by_source = {r.ref: r for r in reads}
    for name in ("demo-001", "demo-002"):
        argo = by_source[f"secret://argocd/cluster-{name}"].clusters[0]
        capi = by_source[f"secret://{name}/{name}-kubeconfig"].clusters[0]
        assert argo.cluster.endpoint == capi.cluster.endpoint
        assert argo.config is not None and capi.config is not None
        assert argo.config.auth == capi.config.auth


def test_every_demo_object_resolves_to_its_cluster() -> None:
    reads, objects = seeded()
    merged = merge(Discovery((), ()), reads)
    known = [
        KnownCluster(c.name, c.endpoint, c.kubeconfig_secret_ref) for c in merged.discovery.clusters
    ]
    index = ClusterIndex.of(known, merged.aliases, merged.secrets)
    found = {}
    for obj in objects:
        read = read_object(obj)
        assert isinstance(read, CdObject), obj
        found[read.app_name] = index.resolve(read.destination)
    assert found == {
        "flux:Kustomization/demo-001/apps": "demo-001",
        "flux:Kustomization/demo-002/apps": "demo-002",
        "flux:Kustomization/demo-003/apps": "demo-003",
        "flux:Kustomization/demo-001/monitoring": "demo-001",
        "argocd:Application/argocd/shop": "demo-001",
        "flux:HelmRelease/demo-002/podinfo": "demo-002",
        "argocd:Application/argocd/payments": "demo-002",
    }
    # Without Argo CD's Secrets the Applications would name no cluster Argo CD knows.
    capi_only = [r for r in reads if r.kind != "argocd"]
    bare = merge(Discovery((), ()), capi_only)
    clusters = [
        KnownCluster(c.name, c.endpoint, c.kubeconfig_secret_ref) for c in bare.discovery.clusters
    ]
    index = ClusterIndex.of(clusters, bare.aliases, bare.secrets)
    shop = read_object(served(demo_cd.application("demo-001", "shop"), 1))
    assert isinstance(shop, CdObject)
    unresolved = index.resolve(shop.destination)
    assert isinstance(unresolved, Unresolved)
    assert unresolved.reason.startswith("Argo CD knows no cluster Secret named 'demo-001'")
