"""Who the informer is to the management cluster, and that no credential ever leaks.

In a pod: the service account's token and CA (paths injected here), the token file read
again when the kubelet rotates it. Outside: a kubeconfig through discovery's own parse;
the forms the informer does not run are refused with a reason that holds no value.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.discovery.kubecreds import from_kubeconfig, load_credentials
from fleetwatch.discovery.secretwatch import watch_specs
from fleetwatch.kube.kubeapi import KubeApi, KubeApiError
from fleetwatch.kube.kubeauth import InClusterPaths, KubeAuthError, in_cluster
from fleetwatch.standin.management import ManagementCluster
from tests.helpers.discovery_informer import (
    SENTINEL,
    argocd_secret,
    capi_secret,
    names,
    running,
    until,
)


@pytest.fixture
def mgmt_seed() -> list[dict[str, Any]]:
    """What the shared ``mgmt`` (tests/helpers/standin_fixtures.py) holds at the start."""
    return [argocd_secret("argo-a"), capi_secret("capi-1")]


def service_account(mgmt: ManagementCluster, folder: Path, token: str) -> InClusterPaths:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "token").write_text(token + "\n")  # the kubelet's file may end in a newline
    (folder / "ca.crt").write_bytes(mgmt.ca_file.read_bytes())
    return InClusterPaths(token=folder / "token", ca=folder / "ca.crt")


@pytest.mark.live
async def test_a_rotated_service_account_token_is_read_again(
    mgmt: ManagementCluster, tmp_path: Path
) -> None:
    old = mgmt.issue_token("system:serviceaccount:fleetwatch:fleetwatch")
    paths = service_account(mgmt, tmp_path / "sa", old)
    host, port = mgmt.url.removeprefix("https://").rsplit(":", 1)
    env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    credentials = load_credentials(None, env, paths)
    assert credentials.origin == "in-cluster"
    async with running(mgmt, credentials=credentials) as informer:
        assert await informer.wait_synced(10)
        await until(lambda: mgmt.open_watches() == 3, what="three watches open")
        new = mgmt.issue_token("system:serviceaccount:fleetwatch:fleetwatch")
        rotated = tmp_path / "sa" / "token.new"
        rotated.write_text(new)
        rotated.replace(paths.token)  # atomically, as the kubelet swaps it
        mgmt.state.tokens.revoke(old)
        watches = mgmt.counts()["watch secrets"]
        mgmt.close_watches()
        await until(lambda: mgmt.counts()["watch secrets"] >= watches + 3, what="rewatched")
        await until(lambda: mgmt.open_watches() == 3, what="three watches with the new token")
        assert informer.errors()["unauthorized"] == 0  # read on change, before any 401
        assert informer.up


@pytest.mark.live
async def test_a_bad_token_is_counted_then_a_good_one_in_its_file_is_used(
    mgmt: ManagementCluster, tmp_path: Path
) -> None:
    paths = service_account(mgmt, tmp_path / "sa", "not-a-token")
    host, port = mgmt.url.removeprefix("https://").rsplit(":", 1)
    async with running(mgmt, credentials=in_cluster(host, port, paths)) as informer:
        await until(lambda: informer.errors()["unauthorized"] >= 3, what="401s")
        assert not informer.synced
        paths.token.write_text(mgmt.issue_token("system:serviceaccount:fleetwatch:fleetwatch"))
        assert await informer.wait_synced(10)


@pytest.mark.live
async def test_no_credential_in_logs_errors_or_reprs(
    mgmt: ManagementCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader = mgmt.issue_token("reader", namespaces=["argocd"], verbs=["list", "watch"])
    credentials = from_kubeconfig([mgmt.write_kubeconfig(tmp_path / "reader.yaml", reader)], "test")
    secrets = {reader, mgmt.token, SENTINEL}
    specs = watch_specs("fleetwatch.io/kubeconfig", ["argocd", "fleet"])
    async with running(mgmt, specs, credentials) as informer:
        await until(lambda: informer.errors()["forbidden"] >= 3, what="fleet forbidden")
        await until(lambda: "cluster-argo-a" in names(informer))
        mgmt.arm_fault(kind="error", count=3, resource="secrets")
        mgmt.close_watches()
        await until(lambda: informer.errors()["server_error"] >= 3, what="500s")
        mgmt.seed([argocd_secret("argo-b")])
        await until(lambda: "cluster-argo-b" in names(informer))
        shown = [
            caplog.text,
            repr(informer),
            *map(repr, informer.reflectors),
            *informer.problems(),
            repr(credentials),
            repr(credentials.token),
            repr(KubeApi(credentials)),
        ]
    for text in shown:
        for secret in secrets:
            assert secret not in text
    assert "forbidden" in caplog.text  # the problem was logged, without the token


def test_a_kubeconfig_with_an_exec_plugin_is_refused_without_its_values(tmp_path: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "m",
        "clusters": [{"name": "m", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [
            {
                "name": "m",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": "get-token",
                        "args": [SENTINEL],
                    }
                },
            }
        ],
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "m"}}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeAuthError, match="exec plugins") as caught:
        load_credentials(str(path), {})
    assert SENTINEL not in str(caught.value)


def test_without_a_pod_or_a_kubeconfig_the_reason_says_so(tmp_path: Path) -> None:
    paths = InClusterPaths(token=tmp_path / "none", ca=tmp_path / "none.crt")
    with pytest.raises(KubeAuthError, match="no in-cluster service account"):
        load_credentials(None, {"KUBECONFIG": str(tmp_path / "missing")}, paths)
    with pytest.raises(KubeAuthError, match="KUBECONFIG is empty"):
        load_credentials(None, {"KUBECONFIG": ""}, paths)


def test_a_token_file_that_vanishes_is_a_credentials_error_not_a_crash(tmp_path: Path) -> None:
    paths = InClusterPaths(token=tmp_path / "token", ca=tmp_path / "ca.crt")
    with pytest.raises(KubeAuthError, match="service account CA"):
        in_cluster("127.0.0.1", "443", paths)
    assert KubeApiError(0, "credentials", "token file x: gone").reason == "credentials"
