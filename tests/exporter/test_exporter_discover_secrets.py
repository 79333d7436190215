"""`fleetwatch discover --discovery.kubernetes` against the management stand-in, as a process.

One complete list of the Secrets, merged after the files: each cluster once with its
``secret://`` source, the ones that cannot be probed with their reason, the problems (a
Secret that is not a kubeconfig, a name a file took first, a namespace forbidden,
credentials that cannot be loaded), exit 0, and no credential anywhere in the output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.standin.management import ThreadedManagementCluster
from tests.helpers.discovery_informer import (
    SENTINEL,
    argocd_secret,
    b64,
    capi_secret,
    labelled_secret,
)

pytestmark = pytest.mark.live

_SCRIPT = Path(sys.executable).parent / "fleetwatch"
FLEETWATCH = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "fleetwatch.cli"]


def argocd_config(name: str, server: str, config: dict[str, Any]) -> dict[str, Any]:
    secret = argocd_secret(name, server)
    secret["data"]["config"] = b64(json.dumps(config))
    return secret


SECRETS = [
    argocd_secret("argo-a", "https://127.0.0.1:6443"),
    argocd_config(
        "argo-basic",
        "https://127.0.0.8:6443",
        {"username": "admin", "password": f"{SENTINEL}-password", "tlsClientConfig": {}},
    ),
    argocd_config(
        "argo-aws",
        "https://127.0.0.7:6443",
        {
            "awsAuthConfig": {"clusterName": "eks-1", "roleARN": f"arn:aws:iam::1:role/{SENTINEL}"},
            "tlsClientConfig": {"keyData": b64(f"{SENTINEL}-key")},
        },
    ),
    argocd_secret("taken", "https://127.0.0.9:6443"),
    capi_secret("capi-1"),
    labelled_secret("team-x", ["ctx-1"]),
    {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "broken",
            "namespace": "teams",
            "labels": {"fleetwatch.io/kubeconfig": "true"},
        },
        "data": {"config": b64(f"not: [a kubeconfig {SENTINEL}")},
    },
]


@pytest.fixture(scope="module")
def mgmt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedManagementCluster]:
    with ThreadedManagementCluster(tmp_path_factory.mktemp("mgmt")) as started:
        started.seed(SECRETS)
        yield started


@pytest.fixture
def main(tmp_path: Path) -> Path:
    """A kubeconfig file whose one context takes the name "taken" first."""
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "taken", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "taken", "user": {"token": f"{SENTINEL}-file"}}],
                "contexts": [{"name": "taken", "context": {"cluster": "taken", "user": "taken"}}],
            }
        )
    )
    return path


def discover(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*FLEETWATCH, "discover", "--discovery.kubernetes", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    return done


def clean(done: subprocess.CompletedProcess[str], *tokens: str) -> None:
    """No credential of the Secrets, the file or the management cluster in the output."""
    for token in (SENTINEL, *tokens):
        assert token not in done.stdout and token not in done.stderr


def discover_both(
    mgmt: ThreadedManagementCluster, main: Path, home: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """``discover`` of the Secrets of ``mgmt`` and the file ``main``, with no credential of
    either in what it prints."""
    done = discover(
        f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}",
        f"--kubeconfig={main}",
        *args,
        home=home,
    )
    clean(done, mgmt.token)
    return done


def test_json_lists_every_secret_cluster_the_unprobeable_ones_and_the_problems(
    mgmt: ThreadedManagementCluster, main: Path, tmp_path: Path
) -> None:
    done = discover_both(mgmt, main, tmp_path, "--output=json")
    doc = json.loads(done.stdout)
    found = {c["name"]: (c["source"], c["probeable"], c["not_probeable"]) for c in doc["clusters"]}
    aws = found.pop("argo-aws")
    assert found == {
        "taken": (str(main), True, None),
        "argo-a": ("secret://argocd/cluster-argo-a", True, None),
        "argo-basic": ("secret://argocd/cluster-argo-basic", True, None),
        "capi-1": ("secret://fleet/capi-1-kubeconfig", True, None),
        "ctx-1": ("secret://teams/team-x#ctx-1.yaml", True, None),
    }
    assert aws[:2] == ("secret://argocd/cluster-argo-aws", False)
    assert "awsAuthConfig" in aws[2]
    assert [c["name"] for c in doc["clusters"]][:2] == ["taken", "argo-a"]  # files first
    problems = {(p["source"], p["context"]): p["reason"] for p in doc["problems"]}
    assert problems[("secret://argocd/cluster-taken", "taken")] == (
        f"duplicate name: first seen in {main}"
    )
    assert ("secret://teams/broken#config", None) in problems
    assert len(problems) == 2


def test_the_table_says_why_a_cluster_cannot_be_probed(
    mgmt: ThreadedManagementCluster, main: Path, tmp_path: Path
) -> None:
    done = discover_both(mgmt, main, tmp_path)
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:7]}
    assert rows["argo-aws"][1:] == [
        "https://127.0.0.7:6443",
        "no",
        "secret://argocd/cluster-argo-aws",
    ]
    assert rows["ctx-1"][2:] == ["yes", "secret://teams/team-x#ctx-1.yaml"]
    assert "6 cluster(s), 2 problem(s)" in done.stdout
    assert (
        "  not probeable: argo-aws (secret://argocd/cluster-argo-aws): its config has awsAuthConfig"
        in done.stdout
    )
    assert (
        "  problem: secret://argocd/cluster-taken (context 'taken'): duplicate name" in done.stdout
    )


def test_a_forbidden_namespace_is_a_problem_and_the_rest_is_listed(
    mgmt: ThreadedManagementCluster, tmp_path: Path
) -> None:
    token = mgmt.issue_token(
        "system:serviceaccount:fleetwatch:reader", namespaces=["argocd"], verbs=["list", "watch"]
    )
    reader = mgmt.write_kubeconfig(tmp_path / "reader.yaml", token)
    started = time.monotonic()
    done = discover(
        f"--discovery.kubernetes.kubeconfig={reader}",
        "--discovery.kubernetes.namespace=argocd",
        "--discovery.kubernetes.namespace=fleet",
        "--kubeconfig=",
        "--output=json",
        home=tmp_path,
    )
    assert time.monotonic() - started < 15  # given up after a few 403s, not a timeout
    clean(done, token, mgmt.token)
    doc = json.loads(done.stdout)
    assert {c["name"] for c in doc["clusters"]} == {"argo-a", "argo-basic", "argo-aws", "taken"}
    api = [p for p in doc["problems"] if p["source"].startswith("management cluster API ")]
    assert len(api) == 3  # the three kinds' watches of namespace fleet
    assert all("namespace fleet" in p["reason"] and "forbidden" in p["reason"] for p in api)


def test_credentials_that_cannot_be_loaded_are_a_problem_not_a_traceback(
    tmp_path: Path,
) -> None:
    done = discover(
        f"--discovery.kubernetes.kubeconfig={tmp_path / 'missing.yaml'}",
        "--kubeconfig=",
        home=tmp_path,
    )
    assert "Traceback" not in done.stderr
    assert "0 cluster(s), 1 problem(s)" in done.stdout
    assert "  problem: --discovery.kubernetes: " in done.stdout
    assert "missing.yaml" in done.stdout


def test_an_api_that_does_not_answer_is_a_problem(tmp_path: Path) -> None:
    with ThreadedManagementCluster(tmp_path / "mgmt") as mgmt:
        mgmt.seed([argocd_secret("argo-a")])
        mgmt.arm_fault(kind="error", count=100_000, verb="list", resource="secrets")
        done = discover(
            f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}", "--kubeconfig=", home=tmp_path
        )
    clean(done, mgmt.token)
    assert "0 cluster(s), 3 problem(s)" in done.stdout
    assert done.stdout.count("500 server_error") == 3
