"""The reactor's HTTP API through aiohttp's test client, with Alertmanager 0.25 payloads."""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from reactor.api.openapi import openapi_document
from tests.helpers.reactor_helpers import AUTH, TOKEN, MakeClient, dump_db, hold_write_lock
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

Client = TestClient[Any, Any]


def kubeconfig(path: Path, contexts: dict[str, str]) -> Path:
    """A tiny kubeconfig: one context per ``name -> server``, token auth."""
    lines = ["apiVersion: v1", "kind: Config", "clusters:"]
    for name, server in contexts.items():
        lines += [f"- name: {name}", "  cluster:", f"    server: {server}"]
    lines += ["users:", "- name: u", "  user:", "    token: not-a-real-token", "contexts:"]
    for name in contexts:
        lines += [f"- name: {name}", "  context:", f"    cluster: {name}", "    user: u"]
    path.write_text("\n".join(lines) + "\n")
    return path


async def setup_fleet(client: Any, headers: dict[str, str] | None = None) -> None:
    """c1, c2 by hand; apps a1, a2 DEPLOYED on c1, b1 DEPLOYED on c2, p1 PENDING on c1."""
    for name in ("c1", "c2"):
        body = {
            "name": name,
            "endpoint": f"https://{name}.test:6443",
            "kubeconfig_secret_ref": name,
        }
        assert (await client.post("/clusters", json=body, headers=headers)).status == 201
    for app, cluster, deploy in (
        ("a1", "c1", 1),
        ("a2", "c1", 1),
        ("b1", "c2", 1),
        ("p1", "c1", 0),
    ):
        resp = await client.post("/apps", json={"name": app, "cluster": cluster}, headers=headers)
        assert resp.status == 201, await resp.text()
        assert (await resp.json())["status"] == "PENDING"
        if deploy:
            resp = await client.post(
                "/deployments", json={"app": app, "cluster": cluster}, headers=headers
            )
            assert resp.status == 201
            assert await resp.json() == {
                "name": app,
                "cluster": cluster,
                "status": "DEPLOYED",
                "reason": None,
                "source": "api",
                "paused": None,
            }


@pytest.fixture
async def client(make_client: MakeClient) -> Client:
    """A reactor on the test's database holding the fleet of :func:`setup_fleet`."""
    started = await make_client()
    await setup_fleet(started)
    return started


async def refused_unchanged(db_path: Path, request: Awaitable[Any], message: str) -> None:
    """``request`` (sent here) is a 400 whose error holds ``message``, and the database is
    as it was."""
    before = dump_db(db_path)
    resp = await request
    assert resp.status == 400
    assert message in (await resp.json())["error"]
    assert dump_db(db_path) == before


async def statuses(client: Any) -> dict[str, str]:
    return {c["name"]: c["status"] for c in await (await client.get("/clusters")).json()}


async def apps(client: Any) -> dict[str, tuple[str, str, str | None]]:
    return {
        a["name"]: (a["cluster"], a["status"], a["reason"])
        for a in await (await client.get("/apps")).json()
    }


async def test_a_group_of_several_clusters_cascades_and_restores(client: Client) -> None:
    group = webhook(
        alert(ONLINE, "c1", 0),
        alert(ONLINE, "c2", 0),
        alert(ONLINE, "c3", 1),  # unknown yet: created, source alerts
        alert("Watchdog", None, 0),  # another alert: skipped
        alert(ONLINE, None, 0),  # no cluster label: skipped
    )
    resp = await client.post("/alerts", json=group, headers={"User-Agent": "Alertmanager/0.25.0"})
    assert resp.status == 200
    assert (await resp.json())["applied"] == 3 and (await resp.json())["skipped"] == 2
    assert await statuses(client) == {"c1": "ONLINE", "c2": "ONLINE", "c3": "ONLINE"}
    c3 = await (await client.get("/clusters/c3")).json()
    assert c3["source"] == "alerts" and c3["endpoint"] is None
    assert c3["status_since"] == "2026-11-30T02:01:00Z"

    # c1 goes down: the Online resolves and the Offline fires, in two groups.
    down = webhook(alert(OFFLINE, "c1", 5))
    resolved = webhook(alert(ONLINE, "c1", 0, 5))
    assert (await client.post("/alerts", json=resolved)).status == 200
    resp = await client.post("/alerts", json=down)
    assert (await resp.json())["apps_degraded"] == 2
    assert await statuses(client) == {"c1": "OFFLINE", "c2": "ONLINE", "c3": "ONLINE"}
    assert await apps(client) == {
        "a1": ("c1", "DEGRADED", "cluster_offline"),
        "a2": ("c1", "DEGRADED", "cluster_offline"),
        "b1": ("c2", "DEPLOYED", None),
        "p1": ("c1", "PENDING", None),
    }
    cluster = await (await client.get("/clusters/c1")).json()
    assert cluster["status_since"] == cluster["outage_since"] == "2026-11-30T02:05:00Z"

    # The gate: 409 naming the cluster and its status, for deployments and reassignments.
    resp = await client.post("/deployments", json={"app": "p1", "cluster": "c1"})
    assert resp.status == 409
    body = await resp.json()
    assert body["cluster"] == "c1" and body["status"] == "OFFLINE"
    assert "'c1' is OFFLINE" in body["error"]
    resp = await client.patch("/apps/b1", json={"cluster": "c1"})
    assert resp.status == 409
    resp = await client.patch("/apps/a1", json={"status": "DEPLOYED"})
    assert resp.status == 409

    # Recovery, Offline resolved and a new Online in one group: only the outage's apps.
    back = webhook(alert(OFFLINE, "c1", 5, 9), alert(ONLINE, "c1", 9))
    resp = await client.post("/alerts", json=back)
    assert (await resp.json())["apps_restored"] == 2
    assert (await apps(client))["a1"] == ("c1", "DEPLOYED", None)
    assert (await statuses(client))["c1"] == "ONLINE"

    text = await (await client.get("/metrics")).text()
    assert 'fleetwatch_reactor_clusters{status="ONLINE"} 3.0' in text
    assert 'fleetwatch_reactor_apps{status="DEPLOYED"} 3.0' in text
    assert "fleetwatch_reactor_outages_opened_total 1.0" in text
    assert "fleetwatch_reactor_outages_closed_total 1.0" in text
    assert "fleetwatch_reactor_deployments_refused_total 3.0" in text
    assert 'fleetwatch_reactor_notifications_total{outcome="applied"} 4.0' in text


async def test_patch_reports_and_reassignments(client: Client) -> None:
    resp = await client.patch("/apps/a1", json={"status": "DEGRADED", "reason": "crashloop"})
    assert resp.status == 200
    assert await resp.json() == {
        "name": "a1",
        "cluster": "c1",
        "status": "DEGRADED",
        "reason": "crashloop",
        "source": "api",
        "paused": None,
    }
    resp = await client.patch("/apps/a2", json={"cluster": "c2"})
    assert (await resp.json())["status"] == "PENDING" and (await resp.json())["cluster"] == "c2"
    resp = await client.patch("/apps/a1", json={"status": "DEPLOYED"})
    assert (await resp.json())["status"] == "DEPLOYED"
    resp = await client.get("/apps/a2")
    assert (await resp.json())["cluster"] == "c2"


async def test_unknown_cluster_is_created_from_alerts_and_never_online_degrades_nothing(
    client: Client,
) -> None:
    resp = await client.post("/alerts", json=webhook(alert(OFFLINE, "c1", 5)))
    assert (await resp.json())["apps_degraded"] == 0
    assert (await apps(client))["a1"] == ("c1", "DEPLOYED", None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "body is not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[]", "must be a JSON object"),
        (b"{}", 'missing "alerts"'),
        (b'{"version": "3", "alerts": []}', "unsupported webhook version '3'"),
        (b'{"alerts": {}}', '"alerts" must be an array'),
        (b'{"alerts": [1]}', "alerts[0] must be an object"),
        (b'{"alerts": [{"status": "firing", "startsAt": "2026-01-01T00:00:00Z"}]}', 'no "labels"'),
        (
            b'{"alerts": [{"labels": {}, "startsAt": "2026-01-01T00:00:00Z"}]}',
            'alerts[0] has no "status"',
        ),
        (b'{"alerts": [{"labels": {}, "status": "firing"}]}', 'no "startsAt"'),
        (
            b'{"alerts": [{"labels": {}, "status": "fire", "startsAt": "2026-01-01T00:00:00Z"}]}',
            'status must be "firing" or "resolved"',
        ),
        (
            b'{"alerts": [{"labels": {"a": 1}, "status": "firing",'
            b' "startsAt": "2026-01-01T00:00:00Z"}]}',
            "alerts[0].labels.a must be a string",
        ),
        (
            b'{"alerts": [{"labels": {}, "status": "firing", "startsAt": "yesterday"}]}',
            "alerts[0].startsAt is not an RFC 3339 timestamp",
        ),
        (
            b'{"alerts": [{"labels": {}, "status": "firing", "startsAt": "2026-02-30T00:00:00Z"}]}',
            "alerts[0].startsAt is not a valid time",
        ),
        (
            b'{"alerts": [{"labels": {}, "status": "resolved", "startsAt": "2026-01-01T00:00:00Z",'
            b' "endsAt": 5}]}',
            "alerts[0].endsAt must be an RFC 3339 timestamp string",
        ),
    ],
)
async def test_bad_webhooks_get_400_and_change_nothing(
    client: Client, db_path: Path, body: bytes, message: str
) -> None:
    # One valid alert in the same group must not be applied either.
    json_body = {"Content-Type": "application/json"}
    await refused_unchanged(db_path, client.post("/alerts", data=body, headers=json_body), message)


async def test_token_401_on_mutations_only(make_client: MakeClient, db_path: Path) -> None:
    registry = CollectorRegistry()
    client = await make_client(token=TOKEN, registry=registry)
    await setup_fleet(client, headers=AUTH)
    before = dump_db(db_path)
    calls = [
        ("POST", "/alerts", webhook(alert(OFFLINE, "c1", 5))),
        ("POST", "/clusters", {"name": "x", "endpoint": "https://x", "kubeconfig_secret_ref": "x"}),
        ("POST", "/apps", {"name": "new", "cluster": "c1"}),
        ("PATCH", "/apps/a1", {"cluster": "c2"}),
        ("POST", "/deployments", {"app": "p1", "cluster": "c1"}),
    ]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        for method, path, body in calls:
            resp = await client.request(method, path, json=body, headers=headers)
            assert resp.status == 401, (method, path, headers)
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
            assert TOKEN not in await resp.text()
    assert dump_db(db_path) == before
    unauthorized = 'fleetwatch_reactor_notifications_total{outcome="unauthorized"}'
    assert (
        registry.get_sample_value(
            "fleetwatch_reactor_notifications_total", {"outcome": "unauthorized"}
        )
        == 3
    ), unauthorized
    for path in ("/clusters", "/apps", "/clusters/c1", "/apps/a1", "/healthz", "/metrics"):
        assert (await client.get(path)).status == 200
    resp = await client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0)), headers=AUTH)
    assert resp.status == 200


async def test_404s(client: Client, db_path: Path) -> None:
    before = dump_db(db_path)
    cases = [
        ("GET", "/clusters/nope", None, "cluster 'nope' not found"),
        ("GET", "/apps/nope", None, "app 'nope' not found"),
        ("PATCH", "/apps/nope", {"cluster": "c1"}, "app 'nope' not found"),
        ("PATCH", "/apps/a1", {"cluster": "nope"}, "cluster 'nope' not found"),
        ("POST", "/apps", {"name": "n", "cluster": "nope"}, "cluster 'nope' not found"),
        ("POST", "/deployments", {"app": "nope", "cluster": "c1"}, "app 'nope' not found"),
        ("POST", "/deployments", {"app": "a1", "cluster": "nope"}, "cluster 'nope' not found"),
        ("DELETE", "/clusters/nope", None, "cluster 'nope' not found"),
        ("DELETE", "/clusters/nope/alerts", None, "cluster 'nope' not found"),
        ("GET", "/no/such/route", None, "Not Found"),
    ]
    for method, path, body, message in cases:
        resp = await client.request(method, path, json=body)
        assert resp.status == 404, (method, path)
        assert (await resp.json())["error"] == message
    resp = await client.put("/clusters/c1")
    assert resp.status == 405 and "error" in await resp.json()
    assert dump_db(db_path) == before


async def test_409_names_that_exist(client: Client, db_path: Path) -> None:
    before = dump_db(db_path)
    body = {"name": "c1", "endpoint": "https://other:6443", "kubeconfig_secret_ref": "x"}
    resp = await client.post("/clusters", json=body)
    assert resp.status == 409 and (await resp.json())["error"] == "cluster 'c1' exists already"
    resp = await client.post("/apps", json={"name": "a1", "cluster": "c2"})
    assert resp.status == 409 and (await resp.json())["error"] == "app 'a1' exists already"
    assert dump_db(db_path) == before


async def test_413_body_too_large(make_client: MakeClient, db_path: Path) -> None:
    client = await make_client(max_body_bytes=4096)
    await setup_fleet(client)
    before = dump_db(db_path)
    big = webhook(*(alert(OFFLINE, f"c{i}", 5) for i in range(40)))
    for path in ("/alerts", "/clusters", "/deployments"):
        resp = await client.post(path, json=big)
        assert resp.status == 413, path
        assert "4096 bytes" in (await resp.json())["error"]

    async def chunks() -> Any:  # no Content-Length: the limit holds while reading
        for _ in range(10):
            yield b" " * 1000

    resp = await client.post("/alerts", data=chunks())
    assert resp.status == 413
    assert dump_db(db_path) == before


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/clusters", {"name": "c9"}, 'missing "endpoint"'),
        (
            "/clusters",
            {"name": " c9", "endpoint": "https://x", "kubeconfig_secret_ref": "r"},
            "without a space at either end",
        ),
        (
            "/clusters",
            {"name": "c9", "endpoint": "ftp://x", "kubeconfig_secret_ref": "r"},
            "http(s) URL",
        ),
        (
            "/clusters",
            {"name": "c9", "endpoint": "https://x", "kubeconfig_secret_ref": ""},
            "non-empty string",
        ),
        (
            "/clusters",
            {"name": "c9", "endpoint": "https://x", "kubeconfig_secret_ref": "r", "extra": 1},
            "unknown field 'extra'",
        ),
        ("/apps", {"name": 5, "cluster": "c1"}, '"name" must be a string'),
        ("/apps", ["a"], "must be a JSON object"),
        ("/deployments", {"app": "a1"}, 'missing "cluster"'),
        ("/deployments", {"app": "", "cluster": "c1"}, "1 to 253 characters"),
    ],
)
async def test_400_bad_api_bodies(
    client: Client, db_path: Path, path: str, body: Any, message: str
) -> None:
    await refused_unchanged(db_path, client.post(path, json=body), message)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, 'give "cluster"'),
        ({"cluster": "c2", "status": "DEPLOYED"}, "not both"),
        ({"status": "DEGRADED"}, 'missing "reason"'),
        ({"status": "PENDING"}, '"status" must be'),
        ({"status": "DEPLOYED", "reason": "x"}, "only with status DEGRADED"),
    ],
)
async def test_400_bad_patches(client: Client, db_path: Path, body: Any, message: str) -> None:
    await refused_unchanged(db_path, client.patch("/apps/a1", json=body), message)


async def test_startup_discovery_is_an_upsert(
    make_client: MakeClient, tmp_path: Path, db_path: Path
) -> None:
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    main = kubeconfig(tmp_path / "config", {"prod-a": "https://127.0.0.1:6443"})
    kubeconfig(folder / "b.yaml", {"prod-b": "https://127.0.0.1:6444"})
    (folder / "broken.yaml").write_text("clusters: [")
    client = await make_client(kubeconfig_path=main, kubeconfig_dir=folder)
    clusters = {c["name"]: c for c in await (await client.get("/clusters")).json()}
    assert set(clusters) == {"prod-a", "prod-b"}
    assert clusters["prod-a"]["source"] == "discovery"
    assert clusters["prod-a"]["kubeconfig_secret_ref"] == str(main)
    await client.post("/alerts", json=webhook(alert(ONLINE, "prod-a", 0)))
    await client.post("/apps", json={"name": "web", "cluster": "prod-a"})
    await client.close()

    # The endpoint moves and the file moves: updated; status, source and apps stay.
    moved = kubeconfig(tmp_path / "config2", {"prod-a": "https://127.0.0.1:7443"})
    client = await make_client(kubeconfig_path=moved, kubeconfig_dir=folder)
    prod_a = await (await client.get("/clusters/prod-a")).json()
    assert prod_a["endpoint"] == "https://127.0.0.1:7443"
    assert prod_a["kubeconfig_secret_ref"] == str(moved)
    assert prod_a["status"] == "ONLINE" and prod_a["source"] == "discovery"
    assert (await (await client.get("/apps/web")).json())["cluster"] == "prod-a"


async def test_every_discovered_name_can_be_tracked(
    make_client: MakeClient, tmp_path: Path
) -> None:
    """A kubeconfig context name is the cluster's name, spaces included ("prod east").

    Discovery took it, the exporter publishes it and the rules fire for it: the reactor
    used to skip its status alerts as "unusable" and refuse apps on it (400), so the cluster
    stayed UNKNOWN for ever and its apps were never degraded.
    """
    main = kubeconfig(tmp_path / "config", {"prod east": "https://127.0.0.1:6443"})
    client = await make_client(kubeconfig_path=main)
    resp = await client.post("/alerts", json=webhook(alert(ONLINE, "prod east", 0)))
    assert (await resp.json())["skipped"] == 0
    resp = await client.post("/apps", json={"name": "web shop", "cluster": "prod east"})
    assert resp.status == 201, await resp.text()
    resp = await client.post("/deployments", json={"app": "web shop", "cluster": "prod east"})
    assert resp.status == 201
    body = webhook(alert(ONLINE, "prod east", 0, 5), alert(OFFLINE, "prod east", 5))
    assert (await (await client.post("/alerts", json=body)).json())["apps_degraded"] == 1
    cluster = await (await client.get("/clusters/prod%20east")).json()
    assert cluster["status"] == "OFFLINE"


async def test_a_secret_name_stays_unknown_with_a_warning(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    body = {
        "name": "manual",
        "endpoint": "https://127.0.0.1:6443",
        "kubeconfig_secret_ref": "prod-kc",
    }
    with caplog.at_level(logging.WARNING):
        resp = await client.post("/clusters", json=body)
    assert resp.status == 201
    cluster = await resp.json()
    assert cluster["status"] == "UNKNOWN" and cluster["source"] == "api"
    assert any("'prod-kc' is not a readable file" in r.getMessage() for r in caplog.records)


async def test_state_survives_a_restart(make_client: MakeClient) -> None:
    client = await make_client()
    await setup_fleet(client)
    await client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0)))
    await client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0, 5), alert(OFFLINE, "c1", 5)))
    await client.patch("/apps/b1", json={"status": "DEGRADED", "reason": "broken"})
    before = (await statuses(client), await apps(client))
    await client.close()

    client = await make_client()
    assert (await statuses(client), await apps(client)) == before
    # The open outage was remembered: the recovery restores its apps, not b1.
    resp = await client.post(
        "/alerts", json=webhook(alert(OFFLINE, "c1", 5, 9), alert(ONLINE, "c1", 9))
    )
    assert (await resp.json())["apps_restored"] == 2
    assert (await apps(client))["b1"] == ("c2", "DEGRADED", "broken")
    # And a duplicate of the old OFFLINE, after the restart, does nothing.
    resp = await client.post("/alerts", json=webhook(alert(OFFLINE, "c1", 5)))
    assert (await resp.json())["clusters_changed"] == 0


async def test_openapi_document_matches_the_routes(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    doc = await resp.json()
    assert doc == openapi_document() and doc["openapi"].startswith("3.")
    routes = set()
    for route in client.app.router.routes():
        if route.method == "HEAD":
            continue
        path = re.sub(r"\{(\w+):[^}]*\}", r"{\1}", route.resource.canonical)
        routes.add((route.method.lower(), path))
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert documented == routes


async def test_metrics_pass_promtool(client: Client, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (scripts/install.sh installs it)")
    await client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0)))
    text = await (await client.get("/metrics")).text()
    for name in (
        "fleetwatch_reactor_apps",
        "fleetwatch_reactor_clusters",
        "fleetwatch_reactor_outages_opened_total",
        "fleetwatch_reactor_outages_closed_total",
        "fleetwatch_reactor_apps_degraded_total",
        "fleetwatch_reactor_apps_restored_total",
        "fleetwatch_reactor_deployments_total",
        "fleetwatch_reactor_deployments_refused_total",
        "fleetwatch_reactor_notifications_total",
        "fleetwatch_reactor_last_notification_timestamp_seconds",
    ):
        assert f"\n{name}" in text, name
    check = await asyncio.create_subprocess_exec(
        promtool,
        "check",
        "metrics",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(check.communicate(text.encode()), 30)
    assert check.returncode == 0, out.decode()


async def test_healthz(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get("/healthz")
    assert resp.status == 200 and await resp.json() == {"status": "ok"}


async def test_a_locked_database_is_503_and_the_retry_succeeds(
    make_client: MakeClient, db_path: Path
) -> None:
    registry = CollectorRegistry()
    client = await make_client(registry=registry, db_busy_timeout_s=0.2)
    await setup_fleet(client)
    with hold_write_lock(db_path):  # another writer holds the lock
        before = dump_db(db_path)
        resp = await client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0)))
        assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        assert "retry" in (await resp.json())["error"]
        resp = await client.post("/deployments", json={"app": "p1", "cluster": "c1"})
        assert resp.status == 503
        assert dump_db(db_path) == before
        # Reads go through their own read-only connection: the lock does not stop them.
        assert (await client.get("/apps")).status == 200
        assert (await client.get("/metrics")).status == 200
    assert (
        registry.get_sample_value("fleetwatch_reactor_notifications_total", {"outcome": "error"})
        == 1
    )
    resp = await client.post("/alerts", json=webhook(alert(ONLINE, "c1", 0)))
    assert resp.status == 200 and (await resp.json())["clusters_changed"] == 1


async def test_an_unavailable_database_is_warned_once_not_per_call(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(db_busy_timeout_s=0.2)
    await setup_fleet(client)
    caplog.set_level(logging.DEBUG, logger="reactor")
    with hold_write_lock(db_path):
        for _ in range(5):
            resp = await client.post("/deployments", json={"app": "p1", "cluster": "c1"})
            assert resp.status == 503
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len([m for m in warnings if "database unavailable" in m]) == 1, warnings
    resp = await client.post("/deployments", json={"app": "p1", "cluster": "c1"})
    assert resp.status == 201
    again = [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()]
    assert again == ["database answers again; 5 call(s) were refused with 503"]


async def test_skipped_alerts_are_logged_and_the_rest_applied(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    group = webhook(
        alert("Watchdog", None, 0),
        alert(OFFLINE, None, 0),
        alert(ONLINE, "c7", 0),
        alert(ONLINE, "tab\tname", 0),
    )
    with caplog.at_level(logging.INFO):
        resp = await client.post("/alerts", json=group)
    assert (await resp.json())["applied"] == 1
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert lines == [
        "notification: skipped 3 alert(s): alerts[0]: alertname 'Watchdog' is not a status "
        "alert; alerts[1]: FleetClusterOffline without a cluster label; alerts[3]: "
        "FleetClusterOnline with an unusable cluster 'tab\\tname'"
    ]
    assert (await (await client.get("/clusters/c7")).json())["status"] == "ONLINE"
    assert "1 cluster(s) UNKNOWN -> ONLINE: c7" in [r.getMessage() for r in caplog.records]


async def test_refused_notifications_are_logged_without_the_token(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Alertmanager re-sends a refused group forever: each refusal says why in the log.

    A 400 always did; a 401 (Alertmanager's credentials_file out of date) and a 413 (a group
    too big for --web.max-body-bytes) were silent, which is the 3 a.m. case.
    """
    client = await make_client(token=TOKEN, max_body_bytes=4096)
    small = webhook(alert(ONLINE, "c1", 0))
    big = webhook(*(alert(OFFLINE, f"c{i}", 5) for i in range(40)))
    with caplog.at_level(logging.INFO):
        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}):
            assert (await client.post("/alerts", json=small, headers=headers)).status == 401
        assert (await client.post("/alerts", json=big, headers=AUTH)).status == 413
        # Not a notification: the API answers 401 as before, without a log line each.
        assert (await client.post("/apps", json={"name": "a", "cluster": "c1"})).status == 401
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [
        "POST /alerts refused (401): no Authorization header; check the webhook's "
        "http_config.authorization in Alertmanager",
        "POST /alerts refused (401): wrong bearer token; check the webhook's "
        "http_config.authorization in Alertmanager",
        "POST /alerts refused (401): Authorization is not 'Bearer <token>'; check the "
        "webhook's http_config.authorization in Alertmanager",
        "POST /alerts refused (413): body too large: the limit is 4096 bytes "
        "(--web.max-body-bytes)",
    ]
    for record in caplog.records:
        assert TOKEN not in record.getMessage() and "wrong-token" not in record.getMessage()


async def test_an_in_memory_database_serves_reads(make_client: MakeClient) -> None:
    """``--db.path :memory:`` (a throw-away reactor): reads see what the writes wrote.

    A second connection to ``:memory:`` is another, empty database, so the separate read
    handle a file gets must not exist here (every read answered 503 "no such table").
    """
    client = await make_client(db_path=Path(":memory:"))
    await setup_fleet(client)
    assert await statuses(client) == {"c1": "UNKNOWN", "c2": "UNKNOWN"}
    assert (await client.get("/apps/a1")).status == 200
    assert (await client.get("/metrics")).status == 200
