"""``fleetwatch gate CLUSTER`` against a real ``fleetwatch reactor`` process, run as a CI
job runs it (a subprocess, its exit code and its output)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from fleetwatch.procs import free_port
from tests.helpers.commands import fleetwatch
from tests.helpers.reactor_live import TOKEN, running_reactor
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

pytestmark = pytest.mark.live


def post(url: str, body: object) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status


@pytest.fixture(scope="module")
def reactor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """prod-up ONLINE, prod-new UNKNOWN, prod-down OFFLINE (an open outage)."""
    with running_reactor(tmp_path_factory.mktemp("gate")) as url:
        for name in ("prod-up", "prod-new", "prod-down"):
            cluster = {"name": name, "endpoint": f"https://{name}:6443"}
            assert post(f"{url}/clusters", {**cluster, "kubeconfig_secret_ref": name}) == 201
        post(f"{url}/alerts", webhook(alert(ONLINE, "prod-up", 0)))
        down = alert(OFFLINE, "prod-down", 5)
        down["annotations"] |= {"reason": "timeout", "reason_class": "unreachable"}
        post(f"{url}/alerts", webhook(down))
        yield url


@pytest.mark.parametrize("cluster", ["prod-up", "prod-new"])
def test_a_cluster_online_or_unknown_lets_the_pipeline_deploy(reactor: str, cluster: str) -> None:
    out = fleetwatch("gate", cluster, "--reactor", reactor)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("deployments allowed")
    assert out.stderr == ""


def test_an_offline_cluster_stops_the_pipeline_with_its_status_and_outage(reactor: str) -> None:
    out = fleetwatch("gate", "prod-down", "--reactor", reactor)
    assert out.returncode == 1
    assert "prod-down" in out.stderr and "OFFLINE" in out.stderr
    assert "since 2026-11-30T02:05:00" in out.stderr  # the outage's start, for the log
    assert "last failure reason: timeout (unreachable)" in out.stderr
    # The same answer POST /deployments gives: one rule (reactor.gate).
    refused = fleetwatch("gate", "prod-down", "--reactor", reactor, "--output", "json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["allowed"] is False
    assert json.loads(refused.stdout)["status"] == "OFFLINE"


def test_a_cluster_the_reactor_does_not_know_is_refused(reactor: str) -> None:
    out = fleetwatch("gate", "prod-nowhere", "--reactor", reactor)
    assert out.returncode == 1
    assert "does not know it" in out.stderr
    assert "cluster 'prod-nowhere' not found" in out.stderr  # the reactor's own words


def test_a_reactor_that_cannot_be_asked_is_exit_2_not_a_verdict() -> None:
    out = fleetwatch("gate", "prod-up", "--reactor", f"http://127.0.0.1:{free_port()}")
    assert out.returncode == 2
    assert "cannot reach" in out.stderr
