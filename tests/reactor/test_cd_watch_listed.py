"""What the CD watches keep of Argo CD's cluster Secrets when they are listed, live.

An API server sends the items of a built-in kind's list without ``apiVersion`` and
``kind`` (a watch event's object has them; custom resources keep theirs in lists too): the
management stand-in does the same. Secrets that exist before the reactor starts, or that a
relist after ``410 Gone`` reads again, arrive that way, and must be kept as those a watch
sends: without their credentials, and read as cluster Secrets.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleetwatch.kube.informer import Informer
from fleetwatch.kube.kubeapi import KubeApi
from fleetwatch.standin.management import ManagementCluster
from reactor.cd.clustersecrets import read_cluster_secret
from reactor.cd.settings import CdSettings
from reactor.cd.watch import cd_watches, stored
from tests.helpers.discovery_informer import FAST, admin_credentials, argocd_secret, until

pytestmark = pytest.mark.live


@pytest.fixture
def mgmt_seed() -> list[dict[str, Any]]:
    """Two Argo CD cluster Secrets there before the informer lists them."""
    return [argocd_secret("c1"), argocd_secret("c2")]


async def test_listed_cluster_secrets_are_kept_without_credentials_and_read(
    mgmt: ManagementCluster,
) -> None:
    settings = CdSettings(argocd=True, argocd_pause="cluster-secret")
    async with (
        KubeApi(admin_credentials(mgmt)) as api,
        Informer(api, cd_watches(settings), FAST, transform=stored) as informer,
    ):
        await until(lambda: informer.synced, what="the first list")
        kept = list(informer.objects().values())
        assert mgmt.counts().get("watch secrets", 0) <= 1  # listed, not sent by a watch
    secrets = sorted(o["metadata"]["name"] for o in kept if o.get("kind") == "Secret")
    assert secrets == ["cluster-c1", "cluster-c2"], kept
    assert all(set(o.get("data", {})) == {"name"} for o in kept), kept  # no config
    assert sorted(read.name for o in kept if (read := read_cluster_secret(o))) == secrets
