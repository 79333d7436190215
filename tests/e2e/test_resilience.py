"""Restarts, a failing reactor and a probe storm: the loop converges and never lies.

Each test runs the real loop (see loop.py). "Nothing happened" is asserted only after a
positive event that would have come after it: e.g. the reactor has seen the OFFLINE alert
resolve, so a wrong restore would already be visible. The clusters fail in different ways
(not ready, hung, HTTP 500, unauthorized, connection refused): each must read as a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.e2e_loop import INTERVAL, Loop

pytestmark = pytest.mark.live


def _deploy_all(loop: Loop, apps: dict[str, str]) -> None:
    for app, cluster in apps.items():
        loop.wait_cluster(cluster, "ONLINE")
        assert loop.deploy(app, cluster)["status"] == "DEPLOYED"


def test_reactor_restarted_during_the_outage(make_loop: Callable[..., Loop]) -> None:
    loop = make_loop(["rr-a", "rr-b"])
    _deploy_all(loop, {"rr-web": "rr-a", "rr-db": "rr-b"})
    loop.set_mode("rr-a", "not_ready")  # /readyz 500: etcd failed
    loop.wait_app("rr-web", "DEGRADED")

    # A restart loses nothing: still DEGRADED, still gated.
    loop.stop_reactor()
    loop.start_reactor()
    assert loop.apps() == {"rr-web": ("DEGRADED", "cluster_offline"), "rr-db": ("DEPLOYED", None)}
    assert loop.cluster_status("rr-a") == "OFFLINE"
    assert loop.deploy_status("rr-db", "rr-a") == 409

    # The end of the old ONLINE reached the reactor (Alertmanager retried it across the
    # restart). Without that, the next ONLINE would wait for a repeat: see
    # test_recovery_hidden_by_a_failing_receiver_comes_with_the_repeat.
    loop.wait_delivered("FleetClusterOnline", "rr-a", "resolved")
    # The cluster comes back while the reactor is down: Alertmanager keeps the ONLINE
    # notification until the reactor answers again.
    loop.stop_reactor()
    loop.set_mode("rr-a", "ok")
    loop.wait(lambda: "rr-a" in loop.firing("FleetClusterOnline"), "rr-a ONLINE in Prometheus")
    loop.start_reactor()
    loop.wait_app("rr-web", "DEPLOYED")
    assert loop.cluster_status("rr-a") == "ONLINE"
    assert loop.apps() == {"rr-web": ("DEPLOYED", None), "rr-db": ("DEPLOYED", None)}


def test_exporter_restarted_during_the_outage_restores_nothing(
    make_loop: Callable[..., Loop],
) -> None:
    loop = make_loop(["ex-a", "ex-b"])
    _deploy_all(loop, {"ex-web": "ex-a", "ex-db": "ex-b"})
    loop.set_mode("ex-a", "hang")  # answers nothing: every probe times out
    loop.wait_app("ex-web", "DEGRADED")

    # Exporter gone: its series go stale, OFFLINE resolves without an ONLINE. The reactor
    # hears it (UNKNOWN) and must restore nothing.
    loop.stop_exporter()
    loop.wait_cluster("ex-a", "UNKNOWN")
    assert loop.apps() == {"ex-web": ("DEGRADED", "cluster_offline"), "ex-db": ("DEPLOYED", None)}

    # Back, with no memory: ex-a is OFFLINE again after N failures, still nothing restored.
    loop.start_exporter()
    loop.wait_cluster("ex-b", "ONLINE")
    loop.wait_cluster("ex-a", "OFFLINE")
    assert loop.apps() == {"ex-web": ("DEGRADED", "cluster_offline"), "ex-db": ("DEPLOYED", None)}

    # The real recovery restores the outage's app.
    loop.set_mode("ex-a", "ok")
    loop.wait_app("ex-web", "DEPLOYED")
    assert loop.apps() == {"ex-web": ("DEPLOYED", None), "ex-db": ("DEPLOYED", None)}


def test_reactor_answering_500_for_a_while_converges(
    make_loop: Callable[..., Loop], record_timing: Callable[[str, float, float | None], None]
) -> None:
    loop = make_loop(["p5-a", "p5-b"], threshold=3)
    _deploy_all(loop, {"p5-web": "p5-a", "p5-db": "p5-b"})
    proxy = loop.proxy
    assert proxy is not None

    loop.set_mode("p5-a", "error")  # HTTP 500 from the API server
    proxy.failing = True
    # Alertmanager tried (and retried) to deliver the OFFLINE alert and got 500s.
    loop.wait(
        lambda: proxy.refused_alerts().count(("FleetClusterOffline", "p5-a", "firing")) >= 3,
        "three refused deliveries of p5-a OFFLINE",
    )
    assert loop.app("p5-web")["status"] == "DEPLOYED"
    proxy.failing = False
    loop.wait_app("p5-web", "DEGRADED")
    assert loop.apps() == {"p5-web": ("DEGRADED", "cluster_offline"), "p5-db": ("DEPLOYED", None)}
    # Let the ONLINE "resolved" through too: Alertmanager then knows the reactor saw the
    # alert end, and will notify its next start (see the test below for when it did not).
    loop.wait_delivered("FleetClusterOnline", "p5-a", "resolved")

    # Same on the way back: the ONLINE notification is refused, then retried.
    proxy.failing = True
    refused_before = len(proxy.refused_alerts())
    loop.set_mode("p5-a", "ok")
    loop.wait(
        lambda: ("FleetClusterOnline", "p5-a", "firing") in proxy.refused_alerts()[refused_before:],
        "a refused delivery of p5-a ONLINE",
    )
    assert loop.app("p5-web")["status"] == "DEGRADED"
    proxy.failing = False
    loop.wait_app("p5-web", "DEPLOYED")
    assert loop.cluster_status("p5-a") == "ONLINE"

    # N = 3 end to end: a clean outage takes at least about three probes.
    down_at = loop.set_mode("p5-a", "down")
    degraded_at = loop.wait_app("p5-web", "DEGRADED")
    record_timing("cluster down -> apps DEGRADED (N=3, 1 s)", degraded_at - down_at, 3 * INTERVAL)
    assert degraded_at - down_at >= 2 * INTERVAL


def test_probe_storm_inhibits_the_cascade(make_loop: Callable[..., Loop]) -> None:
    names = ["sg-1", "sg-2", "sg-3", "sg-4"]
    loop = make_loop(names)
    _deploy_all(loop, {f"app-{n}": n for n in names})

    # The watcher's credentials revoked everywhere at once: the classic watcher-side storm.
    for name in names[:3]:
        loop.set_mode(name, "unauthorized")
    # The guard fires, the three OFFLINE alerts fire in Prometheus but Alertmanager holds
    # them back (inhibited by FleetProbeStorm).
    loop.wait(lambda: loop.firing("FleetProbeStorm") == {""}, "FleetProbeStorm firing")
    loop.wait(
        lambda: loop.firing("FleetClusterOffline") == set(names[:3]), "three OFFLINE in Prometheus"
    )

    def inhibited() -> bool:
        alerts = loop.am_alerts("FleetClusterOffline")
        return len(alerts) == 3 and all(
            a["status"]["state"] == "suppressed" and a["status"]["inhibitedBy"] for a in alerts
        )

    loop.wait(inhibited, "three OFFLINE alerts inhibited in Alertmanager")
    # ONLINE resolved (delivered, not inhibited) reaches the reactor: UNKNOWN. Had an
    # OFFLINE been delivered, it would have come first (new group, no wait).
    for name in names[:3]:
        loop.wait_cluster(name, "UNKNOWN")
    assert {a: s for a, (s, _) in loop.apps().items()} == {f"app-{n}": "DEPLOYED" for n in names}
    assert loop.deploy_status("app-sg-4", "sg-1") == 201  # UNKNOWN: allowed
    assert loop.deploy_status("app-sg-4", "sg-4") == 201

    # Two come back, one stays down: no storm any more; after the guard's hold the real
    # outage is no longer hidden and does cascade.
    loop.set_mode("sg-1", "ok")
    loop.set_mode("sg-2", "ok")
    loop.wait_app("app-sg-3", "DEGRADED")
    loop.wait_cluster("sg-3", "OFFLINE")
    assert loop.firing("FleetProbeStorm") == set()
    assert loop.apps() == {
        "app-sg-1": ("DEPLOYED", None),
        "app-sg-2": ("DEPLOYED", None),
        "app-sg-3": ("DEGRADED", "cluster_offline"),
        "app-sg-4": ("DEPLOYED", None),
    }
    loop.set_mode("sg-3", "ok")
    loop.wait_app("app-sg-3", "DEPLOYED")


def test_repeated_online_repairs_a_reactor_that_lost_its_state(
    make_loop: Callable[..., Loop],
) -> None:
    """Alertmanager's repeats of FleetClusterOnline are the reactor's anti-entropy."""
    loop = make_loop(["ae-a"], repeat_interval="3s")
    loop.wait_cluster("ae-a", "ONLINE")
    # The worst case: the reactor comes back with an empty database (restored from an
    # old backup, say). Discovery knows the cluster again, but not its status...
    proxy = loop.proxy
    assert proxy is not None
    proxy.failing = True  # holds any delivery until we have looked
    loop.stop_reactor()
    for path in loop.db_path.parent.glob(loop.db_path.name + "*"):
        path.unlink()
    loop.start_reactor()
    assert loop.cluster_status("ae-a") == "UNKNOWN"
    proxy.failing = False
    # ...until the next repeat of the still-firing ONLINE alert: nothing else changed, so
    # nothing else would make Alertmanager notify.
    loop.wait_cluster("ae-a", "ONLINE", timeout=15)


def test_silenced_offline_is_planned_maintenance(make_loop: Callable[..., Loop]) -> None:
    """Silencing a cluster's FleetClusterOffline avoids the cascade (planned maintenance)."""
    loop = make_loop(["mt-a", "mt-b"])
    _deploy_all(loop, {"mt-web": "mt-a", "mt-db": "mt-b"})
    now = datetime.now(UTC)
    loop.am_post(
        "/api/v2/silences",
        {
            "matchers": [
                {"name": "alertname", "value": "FleetClusterOffline", "isRegex": False},
                {"name": "cluster", "value": "mt-a", "isRegex": False},
            ],
            "startsAt": now.isoformat(),
            "endsAt": (now + timedelta(hours=1)).isoformat(),
            "createdBy": "e2e",
            "comment": "upgrading the control plane of mt-a",
        },
    )
    loop.set_mode("mt-a", "error")

    def silenced() -> bool:
        alerts = loop.am_alerts("FleetClusterOffline")
        return len(alerts) == 1 and bool(alerts[0]["status"]["silencedBy"])

    loop.wait(silenced, "mt-a OFFLINE silenced in Alertmanager")
    loop.wait_cluster("mt-a", "UNKNOWN")  # ONLINE resolved reached the reactor
    assert loop.apps() == {"mt-web": ("DEPLOYED", None), "mt-db": ("DEPLOYED", None)}
    loop.set_mode("mt-a", "ok")
    loop.wait_cluster("mt-a", "ONLINE")
    assert loop.apps() == {"mt-web": ("DEPLOYED", None), "mt-db": ("DEPLOYED", None)}


def test_recovery_hidden_by_a_failing_receiver_comes_with_the_repeat(
    make_loop: Callable[..., Loop],
) -> None:
    """The reactor saw OFFLINE but never the end of ONLINE: the repeat restores the apps.

    Alertmanager remembers what it delivered by alert labels, not by ``startsAt``: when
    the "resolved" of ONLINE never got through, the ONLINE that starts again after the
    outage looks already known, and only ``repeat_interval`` sends it (this is why the
    shipped route keeps that interval short).
    """
    loop = make_loop(["rp-a", "rp-b"], repeat_interval="4s")
    _deploy_all(loop, {"rp-web": "rp-a", "rp-db": "rp-b"})
    proxy = loop.proxy
    assert proxy is not None
    proxy.failing_alertname = "FleetClusterOnline"  # OFFLINE gets through, ONLINE does not
    loop.set_mode("rp-a", "error")
    loop.wait_app("rp-web", "DEGRADED")
    loop.wait(
        lambda: ("FleetClusterOnline", "rp-a", "resolved") in proxy.refused_alerts(),
        "rp-a ONLINE resolved refused",
    )
    loop.set_mode("rp-a", "ok")
    loop.wait(lambda: "rp-a" in loop.firing("FleetClusterOnline"), "rp-a ONLINE in Prometheus")
    proxy.failing_alertname = None
    loop.wait_app("rp-web", "DEPLOYED", timeout=20)
    assert loop.cluster_status("rp-a") == "ONLINE"
    assert ("FleetClusterOnline", "rp-a", "firing") in proxy.forwarded_alerts()
