"""The operations guide's whole story, end to end with real Prometheus and Alertmanager."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fleetwatch.cli.wiring import HttpStatusError
from tests.helpers.e2e_loop import INTERVAL, Loop

pytestmark = pytest.mark.live


def test_a_cluster_goes_down_and_comes_back(
    make_loop: Callable[..., Loop], record_timing: Callable[[str, float, float | None], None]
) -> None:
    loop = make_loop(["st-east", "st-west"])
    loop.wait_cluster("st-east", "ONLINE")
    loop.wait_cluster("st-west", "ONLINE")
    for app, cluster in [
        ("web", "st-east"),
        ("api", "st-east"),
        ("batch", "st-east"),
        ("report", "st-west"),
    ]:
        assert loop.deploy(app, cluster)["status"] == "DEPLOYED"
    # Broken before the outage, for its own reason: no outage may "repair" it.
    loop.reactor.patch("/apps/batch", {"status": "DEGRADED", "reason": "crashloop"})
    # Registered by hand with a Secret name: cannot be probed, stays UNKNOWN, deployable.
    loop.reactor.post(
        "/clusters",
        {
            "name": "st-legacy",
            "endpoint": "https://127.1.2.3:6443",
            "kubeconfig_secret_ref": "secret/st-legacy-kubeconfig",
        },
    )
    assert loop.deploy("legacy-app", "st-legacy")["status"] == "DEPLOYED"

    down_at = loop.set_mode("st-east", "down")
    degraded_at = loop.wait_app("web", "DEGRADED")
    floor = loop.threshold * INTERVAL
    record_timing("cluster down -> apps DEGRADED (N=2, 1 s)", degraded_at - down_at, floor)
    assert degraded_at - down_at >= floor - INTERVAL  # not before N probes could fail

    assert loop.cluster_status("st-east") == "OFFLINE"
    assert loop.apps() == {
        "web": ("DEGRADED", "cluster_offline"),
        "api": ("DEGRADED", "cluster_offline"),
        "batch": ("DEGRADED", "crashloop"),
        "report": ("DEPLOYED", None),
        "legacy-app": ("DEPLOYED", None),
    }
    assert loop.cluster_status("st-west") == "ONLINE"
    try:
        loop.reactor.post("/deployments", {"app": "report", "cluster": "st-east"})
        raise AssertionError("a deployment to an OFFLINE cluster was accepted")
    except HttpStatusError as exc:
        assert exc.status == 409
        assert "st-east" in exc.body["error"]
    assert loop.app("report")["cluster"] == "st-west"
    assert loop.deploy_status("report", "st-west") == 201
    assert loop.cluster_status("st-legacy") == "UNKNOWN"
    assert loop.deploy_status("legacy-app", "st-legacy") == 201

    # The end of the old ONLINE must have reached the reactor before the cluster comes
    # back. With 1 s probes an outage can be shorter than Alertmanager's group_interval,
    # and a resolve and re-fire inside one group_interval is never sent: the recovery
    # would then wait for a repeat (test_resilience covers that path). With real probe
    # intervals (minutes) against a 10 s group_interval this cannot happen.
    loop.wait_delivered("FleetClusterOnline", "st-east", "resolved")
    up_at = loop.set_mode("st-east", "ok")
    restored_at = loop.wait_app("web", "DEPLOYED")
    record_timing("cluster back -> apps DEPLOYED", restored_at - up_at, None)
    loop.wait_app("api", "DEPLOYED")
    assert loop.cluster_status("st-east") == "ONLINE"
    assert loop.apps() == {
        "web": ("DEPLOYED", None),
        "api": ("DEPLOYED", None),
        "batch": ("DEGRADED", "crashloop"),
        "report": ("DEPLOYED", None),
        "legacy-app": ("DEPLOYED", None),
    }
    assert loop.deploy_status("report", "st-east") == 201
    assert loop.cluster_status("st-legacy") == "UNKNOWN"
