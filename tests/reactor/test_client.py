"""A client generated from the OpenAPI document drives a real reactor: the document is
usable, not only valid.

openapi-python-client (a test dependency) generates a package from ``/openapi.json`` into
a temporary folder at test time (offline: it needs only the document), exactly as
docs/reactor.md shows; the test then creates a cluster, an app and a deployment through
it, takes the cluster OFFLINE with an Alertmanager webhook sent through it too, and sees
the deployment gate's 409 as the client's ``Refusal`` model.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers.reactor_live import TOKEN, running_reactor

pytestmark = pytest.mark.live

PACKAGE = "fleetwatch_reactor_client"


@pytest.fixture(scope="module")
def reactor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_reactor(tmp_path_factory.mktemp("client-reactor")) as base:
        yield base


@pytest.fixture(scope="module")
def client_package(reactor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    folder = tmp_path_factory.mktemp("client")
    with urllib.request.urlopen(f"{reactor}/openapi.json", timeout=10) as resp:
        (folder / "openapi.json").write_bytes(resp.read())
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "openapi-python-client"),
            "generate",
            "--path",
            "openapi.json",
            "--meta",
            "none",
            "--output-path",
            PACKAGE,
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def api(package: ModuleType, operation: str) -> Any:
    return importlib.import_module(f"{package.__name__}.api.default.{operation}")


def test_a_generated_client_creates_deploys_and_sees_the_gate(
    reactor: str, client_package: ModuleType
) -> None:
    m = importlib.import_module(f"{PACKAGE}.models")
    client = client_package.AuthenticatedClient(base_url=reactor, token=TOKEN)

    new = m.NewCluster(
        name="prod east", endpoint="https://127.0.0.1:6443", kubeconfig_secret_ref="r"
    )
    created = api(client_package, "create_cluster").sync_detailed(client=client, body=new)
    assert created.status_code == 201 and created.parsed.name == "prod east"
    assert created.parsed.status.value == "UNKNOWN"

    body = m.NewApp(name="shop", cluster="prod east")
    app = api(client_package, "create_app").sync(client=client, body=body)
    assert (app.name, app.status.value) == ("shop", "PENDING")

    deployment = m.Deployment(app="shop", cluster="prod east")
    deployed = api(client_package, "create_deployment").sync_detailed(
        client=client, body=deployment
    )
    assert deployed.status_code == 201 and deployed.parsed.status.value == "DEPLOYED"

    for alertname, starts in (
        ("FleetClusterOnline", "2026-01-01T00:00:00Z"),
        ("FleetClusterOffline", "2026-01-01T00:05:00Z"),
    ):
        webhook = m.Webhook.from_dict(
            {
                "version": "4",
                "alerts": [
                    {
                        "status": "firing",
                        "labels": {"alertname": alertname, "cluster": "prod east"},
                        "startsAt": starts,
                        "endsAt": "0001-01-01T00:00:00Z",
                        "fingerprint": "f00d",
                    }
                ],
            }
        )
        result = api(client_package, "post_alerts").sync(client=client, body=webhook)
        assert result.applied == 1, result

    cluster = api(client_package, "get_cluster").sync(name="prod east", client=client)
    assert cluster.status.value == "OFFLINE" and len(cluster.outages) == 1
    assert (
        api(client_package, "get_app").sync(name="shop", client=client).status.value == "DEGRADED"
    )

    refused = api(client_package, "create_deployment").sync_detailed(client=client, body=deployment)
    assert refused.status_code == 409
    assert isinstance(refused.parsed, m.Refusal)
    assert (refused.parsed.cluster, refused.parsed.status.value) == ("prod east", "OFFLINE")
    assert json.loads(refused.content)["error"] == refused.parsed.error


def test_without_the_token_the_generated_client_gets_401(
    reactor: str, client_package: ModuleType
) -> None:
    m = importlib.import_module(f"{PACKAGE}.models")
    client = client_package.Client(base_url=reactor)
    answer = api(client_package, "create_app").sync_detailed(
        client=client, body=m.NewApp(name="x", cluster="y")
    )
    assert answer.status_code == 401 and isinstance(answer.parsed, m.Error)
