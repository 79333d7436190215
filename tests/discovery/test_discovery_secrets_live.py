"""A Secret's clusters probed with the exporter's own credentials, against the stand-in.

The pure tests hold a Secret's ``ContextAuth`` equal to a file's; this one closes the loop
through ``exporter.net.credentials.build_credentials`` and a real TLS handshake: an Argo CD
Secret's bearer token and CA data, a Cluster API Secret's embedded client certificate.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from exporter.net import FleetClient, Slot
from fleetwatch.discovery import Discovery, merge, probeable, read_secret
from fleetwatch.standin import StandinFleet
from tests.helpers.discovery_informer import ARGOCD_CLUSTER, api_secret


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


@pytest.mark.live
async def test_secret_clusters_probe_a_standin_with_the_exporters_credentials(
    tmp_path: Path,
) -> None:
    async with StandinFleet(tmp_path / "fleet") as fleet:
        token_cluster = await fleet.add_cluster("argo-prod")
        cert_cluster = await fleet.add_cluster("capi-wl")
        certs = fleet.certs
        config = {
            "bearerToken": token_cluster.token,
            "tlsClientConfig": {"caData": b64(certs.ca_pem)},
        }
        data: dict[str, str | bytes] = {
            "name": "argo-prod",
            "server": token_cluster.url,
            "config": json.dumps(config),
        }
        argo = api_secret("cluster-argo-prod", "argocd", ARGOCD_CLUSTER, data, rv="7", uid="u-1")
        admin = certs.default_client
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "admin@wl",
            "clusters": [
                {
                    "name": "wl",
                    "cluster": {
                        "server": cert_cluster.url,
                        "certificate-authority-data": b64(certs.ca_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(admin.cert_pem),
                        "client-key-data": b64(admin.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "admin@wl", "context": {"cluster": "wl", "user": "admin"}}],
        }
        capi = api_secret(
            "capi-wl-kubeconfig",
            "fleet",
            {"cluster.x-k8s.io/cluster-name": "capi-wl"},
            {"value": yaml.safe_dump(kubeconfig)},
            type_="cluster.x-k8s.io/secret",
            rv="9",
            uid="u-2",
        )
        found = [read_secret(argo), read_secret(capi)]
        merged = merge(Discovery((), ()), [f for f in found if f is not None])
        assert merged.discovery.problems == ()
        assert [c.name for c in merged.discovery.clusters] == ["argo-prod", "capi-wl"]
        client = FleetClient(timeout=5.0, interval=60.0, environ={})
        try:
            for cluster in merged.discovery.clusters:
                assert probeable(cluster.kubeconfig_secret_ref, merged.held)
                ctx = merged.context_config(cluster)
                assert ctx is not None
                probed = await client.probe(cluster, ctx, Slot(None))
                assert probed.result.success, probed.result
        finally:
            await client.aclose()
        assert fleet.requests("argo-prod") == 1 and fleet.requests("capi-wl") == 1
