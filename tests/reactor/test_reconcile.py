"""Reconciliation's rules, as a table: what a listing of Alertmanager's alerts is news of.

Pure (``reactor.reconcile.plan``): the listings and the reactor's state in, the signals the
state machine will fold out. The same rules against a real Alertmanager are in
test_reconcile_alertmanager.py. Then reactor apps reconciling with a small server in
Alertmanager's place (what a real one never lists: unreadable entries; and a webhook
reviving what a listing resolved), and the task's life: shutdown never waits on an
Alertmanager that does not answer.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from reactor.alertmanager.client import (
    AlertmanagerClient,
    AlertmanagerError,
    ListedAlert,
    Listing,
    display_name,
    read_alert,
    unreadable_cluster,
)
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.app import create_app
from reactor.context import ReactorSettings
from reactor.reconcile import PeerListing, plan, request_timeout
from reactor.statemachine import AlertState, ClusterAlertState, Status, StatusAlert, apply
from reactor.store import ClusterRecord
from tests.helpers.etcd_poll import poll
from tests.helpers.reactor_helpers import MakeClient
from tests.helpers.reactor_payloads import alert, webhook

S = 1_000_000  #: one second in microseconds
NOW = 1_000 * S
ON, OFF = StatusAlert.ONLINE.value, StatusAlert.OFFLINE.value
CLUSTER_C1 = {"name": "c1", "endpoint": "https://c1:6443", "kubeconfig_secret_ref": "c1"}


def listed(name: str, cluster: str, starts: int, suppressed: bool = False) -> ListedAlert:
    return ListedAlert({"alertname": name, "cluster": cluster}, starts * S, suppressed)


def answer(*alerts: ListedAlert, old_enough: bool = True, name: str = "am") -> PeerListing:
    return PeerListing(name, Listing(alerts, started_at=0), old_enough)


def held(
    name: str, online: AlertState | None = None, offline: AlertState | None = None
) -> ClusterRecord:
    return ClusterRecord(1, name, None, None, "alerts", ClusterAlertState(online, offline), None)


def firing(starts: int) -> AlertState:
    return AlertState(firing=True, starts_at=starts * S)


def resolved(starts: int, ends: int) -> AlertState:
    return AlertState(firing=False, starts_at=starts * S, ends_at=ends * S)


def gone(starts: int) -> AlertState:
    """Resolved by this reconciliation (at NOW): inferred from absence, so provisional."""
    return AlertState(firing=False, starts_at=starts * S, ends_at=NOW, inferred=True)


def news(records: Sequence[ClusterRecord], *peers: PeerListing) -> set[tuple[str, str, AlertState]]:
    return {(s.cluster, s.alert.value, s.state) for s in plan(records, peers, NOW).signals}


def test_an_active_alert_is_firing_since_its_starts_at() -> None:
    assert news([], answer(listed(ON, "c1", 10))) == {("c1", ON, firing(10))}


def test_what_the_reactor_knows_is_no_news() -> None:
    records = [held("c1", online=firing(10)), held("c2", offline=resolved(5, 9))]
    assert news(records, answer(listed(ON, "c1", 10), listed(OFF, "c2", 5))) == set()


def test_a_suppressed_alert_carries_no_news_and_is_not_resolved() -> None:
    # Inhibited by the storm guard or silenced: never a cascade, and still listed.
    assert news([held("c1", online=firing(0))], answer(listed(OFF, "c1", 10, True))) == {
        ("c1", ON, gone(0))
    }
    assert news([held("c1", offline=firing(10))], answer(listed(OFF, "c1", 10, True))) == set()


def test_held_firing_and_no_longer_listed_is_resolved_now() -> None:
    records = [held("c1", online=firing(0)), held("c2", offline=firing(5))]
    assert news(records, answer()) == {
        ("c1", ON, gone(0)),
        ("c2", OFF, gone(5)),
    }


def test_an_alertmanager_up_too_short_resolves_nothing() -> None:
    records = [held("c1", online=firing(0))]
    assert news(records, answer(old_enough=False)) == set()
    # ...but what it lists is news all the same.
    assert news([], answer(listed(ON, "c2", 3), old_enough=False)) == {("c2", ON, firing(3))}


def test_listed_by_any_peer_is_not_resolved() -> None:
    records = [held("c1", online=firing(0))]
    young = answer(listed(ON, "c1", 0), old_enough=False, name="young")
    assert news(records, young, answer(name="old")) == set()


def test_a_newer_instance_listed_resolves_the_held_one() -> None:
    # The Offline since 5 ended; a new one since 20 is silenced: 5 resolved, 20 no news.
    records = [held("c1", offline=firing(5))]
    assert news(records, answer(listed(OFF, "c1", 20, True))) == {("c1", OFF, gone(5))}


def test_other_alerts_and_unusable_clusters_are_ignored() -> None:
    other = ListedAlert({"alertname": "FleetProbeStorm"}, 1 * S, False)
    no_cluster = ListedAlert({"alertname": ON}, 1 * S, False)
    bad_cluster = ListedAlert({"alertname": ON, "cluster": " x"}, 1 * S, False)
    assert news([], answer(other, no_cluster, bad_cluster)) == set()


def test_a_held_alert_starting_after_now_is_not_resolved() -> None:
    assert news([held("c1", online=firing(NOW // S + 5))], answer()) == set()


def fake_alertmanager(
    entries: list[object], uptime: str = "2020-01-01T00:00:00Z"
) -> web.Application:
    """A small real server in Alertmanager's place, up since ``uptime``, listing ``entries``."""

    async def alerts(_: web.Request) -> web.Response:
        return web.json_response(entries)

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"uptime": uptime})

    app = web.Application()
    app.router.add_get("/api/v2/alerts", alerts)
    app.router.add_get("/api/v2/status", status)
    return app


def test_a_webhook_to_the_nanosecond_and_a_listing_to_the_millisecond_are_one_instance() -> None:
    """What Alertmanager 0.25 sends of one alert: its webhook keeps the sender's nanoseconds,
    its API v2 lists them cut to the millisecond (checked live in
    test_reconcile_alertmanager.py). Held from the webhook, listed by the API: no news."""
    body = webhook(alert(OFF, "c1", 0))
    body["alerts"][0]["startsAt"] = "2026-12-02T10:00:00.123456789Z"
    signal = status_signals(parse_webhook(json.dumps(body).encode()), now=1.8e9).signals[0]
    state = apply(ClusterAlertState(), [(signal.alert, signal.state)]).state
    assert state.status is Status.OFFLINE
    entry = read_alert(
        {
            "labels": {"alertname": OFF, "cluster": "c1"},
            "startsAt": "2026-12-02T10:00:00.123Z",
            "status": {"state": "active", "silencedBy": [], "inhibitedBy": []},
        }
    )
    assert entry is not None
    late = int(1.8e9) * S
    assert plan([held("c1", offline=state.offline)], [answer(entry)], late).signals == ()


@pytest.mark.parametrize(
    "sent",
    [
        "2026-12-02T10:00:00.123456789Z",
        "2026-12-02T10:00:00.1234567Z",
        "2026-12-02T10:00:00.123456Z",
        "2026-12-02T10:00:00.123Z",
        "2026-12-02T11:00:00.123999999+01:00",
        "2026-12-02t10:00:00.1239z",
    ],
)
def test_every_time_is_kept_to_the_millisecond(sent: str) -> None:
    body = webhook(alert(OFF, "c1", 0, 1))
    body["alerts"][0]["startsAt"] = sent
    body["alerts"][0]["endsAt"] = re.sub(r"(1[01]):00:00", r"\1:00:01", sent)
    parsed = parse_webhook(json.dumps(body).encode()).alerts[0]
    at = int(datetime(2026, 12, 2, 10, tzinfo=UTC).timestamp()) * S + 123_000
    assert (parsed.starts_at, parsed.ends_at) == (at, at + S)


def test_a_resolution_inferred_from_absence_is_revived_by_a_listing() -> None:
    """An Alertmanager restarted empty made the reactor resolve c1's Offline; Prometheus
    re-sent it (same startsAt), the Alertmanager lists it again: firing again."""
    records = [held("c1", offline=gone(5))]
    assert news(records, answer(listed(OFF, "c1", 5))) == {("c1", OFF, firing(5))}
    # Suppressed, it still carries no news; Alertmanager's own resolution is final.
    assert news(records, answer(listed(OFF, "c1", 5, True))) == set()
    told = [held("c1", offline=resolved(5, 9))]
    assert news(told, answer(listed(OFF, "c1", 5))) == set()


def test_an_unreadable_entry_resolves_nothing_for_its_cluster() -> None:
    records = [held("c1", offline=firing(5)), held("c2", online=firing(0))]
    listing = Listing((), started_at=0, unreadable_for=frozenset({"c1"}))
    assert news(records, PeerListing("am", listing, True)) == {("c2", ON, gone(0))}


def test_an_entry_whose_labels_cannot_be_read_resolves_nothing() -> None:
    records = [held("c1", offline=firing(5)), held("c2", online=firing(0))]
    listing = Listing((listed(ON, "c3", 1),), started_at=0, unreadable_unknown=True)
    assert news(records, PeerListing("am", listing, True)) == {("c3", ON, firing(1))}


@pytest.mark.parametrize(
    ("raw", "cluster"),
    [
        ({"labels": {"alertname": OFF, "cluster": "c1"}, "startsAt": "yesterday"}, "c1"),
        ({"labels": {"alertname": ON, "cluster": "c1"}, "startsAt": "0001-01-01T00:00:00Z"}, "c1"),
        ({"labels": {"alertname": OFF, "cluster": "c1"}}, "c1"),
        ({"labels": {"alertname": "Other", "cluster": "c1"}, "startsAt": "x"}, None),
        ({"labels": {"alertname": OFF}, "startsAt": "x"}, None),
    ],
)
def test_an_unreadable_status_alert_names_its_cluster(raw: object, cluster: str | None) -> None:
    assert read_alert(raw) is None
    assert unreadable_cluster(raw) == cluster


async def test_a_listing_says_which_clusters_it_cannot_vouch_for(aiohttp_server: Any) -> None:
    entries = [
        {"labels": {"alertname": ON, "cluster": "c1"}, "startsAt": "1970-01-01T00:00:10Z"},
        {"labels": {"alertname": OFF, "cluster": "c2"}, "startsAt": "soon"},
        {"labels": {"alertname": "Other"}, "startsAt": "soon"},
    ]
    server = await aiohttp_server(fake_alertmanager(entries, uptime="1970-01-01T00:00:05Z"))
    async with aiohttp.ClientSession() as session:
        got = await AlertmanagerClient(f"http://127.0.0.1:{server.port}", session, 2).listing()
    assert got.alerts == (ListedAlert({"alertname": ON, "cluster": "c1"}, 10 * S, True),)
    assert (got.unreadable, got.unreadable_for, got.unreadable_unknown) == (2, {"c2"}, False)
    entries.append({"labels": None})
    async with aiohttp.ClientSession() as session:
        got = await AlertmanagerClient(f"http://127.0.0.1:{server.port}", session, 2).listing()
    assert got.unreadable_unknown


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {
                "labels": {"alertname": ON, "cluster": "c1"},
                "startsAt": "1970-01-01T00:00:10.000Z",
                "status": {"state": "active", "silencedBy": [], "inhibitedBy": []},
            },
            listed(ON, "c1", 10),
        ),
        (
            {
                "labels": {"alertname": OFF, "cluster": "c1"},
                "startsAt": "1970-01-01T00:00:10Z",
                "status": {"state": "suppressed", "silencedBy": ["x"], "inhibitedBy": []},
            },
            ListedAlert({"alertname": OFF, "cluster": "c1"}, 10 * S, True, silenced=True),
        ),
        ({"labels": {"alertname": ON}, "startsAt": "yesterday"}, None),
        ({"labels": {"alertname": 1}, "startsAt": "1970-01-01T00:00:10Z"}, None),
        ([], None),
    ],
)
def test_read_alert(raw: object, expected: ListedAlert | None) -> None:
    assert read_alert(raw) == expected


def test_display_name_never_shows_credentials() -> None:
    assert display_name("http://admin:hunter2@am.example:9093/am") == "am.example:9093"
    assert display_name("http://[::1]:9093") == "[::1]:9093"


def test_request_timeout_follows_the_interval_within_bounds() -> None:
    assert [request_timeout(s) for s in (0.5, 5, 60)] == [2.0, 5.0, 10.0]


def test_an_alert_from_the_future_is_skipped_as_in_a_webhook() -> None:
    far = answer(listed(OFF, "c1", NOW // S + 3600))
    result = plan([], [far], NOW, max_future_skew_s=600)
    assert result.signals == () and len(result.skipped) == 1
    assert "in the future" in result.skipped[0]


async def test_shutdown_cancels_a_reconciliation_in_flight(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """An Alertmanager that accepts and never answers holds no shutdown (10 s timeout)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        registry = CollectorRegistry()
        settings = ReactorSettings(
            db_path=tmp_path / "state.db", alertmanager_urls=(url,), reconcile_interval_s=60
        )
        client: TestClient[Any, Any] = await aiohttp_client(create_app(settings, registry=registry))

        async def runs() -> float:
            return registry.get_sample_value("fleetwatch_reactor_reconcile_runs_total") or 0.0

        await poll(runs, lambda n: n >= 1, 10, "a reconciliation under way")
        started = time.monotonic()
        await client.close()
        # Without the cancel, shutdown waits out the request's 10 s timeout; half of it is
        # a bound a loaded machine keeps.
        assert time.monotonic() - started < 5.0
    names = {task.get_name() for task in asyncio.all_tasks()}
    assert "fleetwatch-reconciliation" not in names


async def test_the_client_sends_basic_auth_and_says_why_an_answer_is_unusable(
    aiohttp_server: Any,
) -> None:
    """A small real server in Alertmanager's place: what the client sends, how it fails."""
    seen: list[str] = []
    answers: dict[str, web.Response] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return answers[request.path]

    app = web.Application()
    app.router.add_get("/am/api/v2/alerts", handler)
    app.router.add_get("/am/api/v2/status", handler)
    server = await aiohttp_server(app)
    url = f"http://admin:hunter2@127.0.0.1:{server.port}/am"
    async with aiohttp.ClientSession() as session:
        client = AlertmanagerClient(url, session, timeout_s=2)
        assert client.name == f"127.0.0.1:{server.port}"
        cases: list[tuple[web.Response, web.Response, str | None]] = [
            (web.json_response([]), web.json_response({"uptime": "1970-01-01T00:00:05Z"}), None),
            (web.Response(status=500), web.json_response({}), "answered HTTP 500"),
            (web.Response(text="<html>"), web.json_response({}), "did not answer JSON"),
            (web.json_response({}), web.json_response({}), "did not answer a JSON array"),
            (web.json_response([]), web.json_response({"uptime": "soon"}), "RFC 3339"),
        ]
        for alerts, status, problem in cases:
            answers.update({"/am/api/v2/alerts": alerts, "/am/api/v2/status": status})
            if problem is None:
                assert await client.listing() == Listing((), started_at=5 * S)
            else:
                with pytest.raises(AlertmanagerError, match=problem) as raised:
                    await client.listing()
                assert "hunter2" not in str(raised.value)
    assert seen[0] == "Basic " + base64.b64encode(b"admin:hunter2").decode()


async def statuses(client: TestClient[Any, Any]) -> dict[str, str]:
    return {c["name"]: c["status"] for c in await (await client.get("/clusters")).json()}


async def test_a_repeat_of_an_offline_resolved_by_absence_revives_it(
    make_client: MakeClient, aiohttp_server: Any
) -> None:
    """A reactor (SQLite, PostgreSQL) held c1 OFFLINE; a second one reconciles with an
    Alertmanager that lists nothing (restarted empty, or the wrong --alertmanager.url) and
    resolves it. Alertmanager's repeat of the firing Offline then reopens the gate's refusal."""
    first = await make_client()
    assert (await first.post("/clusters", json=CLUSTER_C1)).status == 201
    for name in ("web", "api"):
        assert (await first.post("/apps", json={"name": name, "cluster": "c1"})).status == 201
    assert (await first.post("/deployments", json={"app": "web", "cluster": "c1"})).status == 201
    assert (await first.post("/alerts", json=webhook(alert(ON, "c1", 0)))).status == 200
    down = webhook(alert(ON, "c1", 0, 5), alert(OFF, "c1", 5))
    assert (await first.post("/alerts", json=down)).status == 200

    empty = await aiohttp_server(fake_alertmanager([]))
    second = await make_client(
        alertmanager_urls=(f"http://127.0.0.1:{empty.port}",),
        reconcile_interval_s=3600,  # once, at start
        min_uptime_s=0,
    )
    await poll(lambda: statuses(second), lambda s: s == {"c1": "UNKNOWN"}, 10, "resolved")
    assert (await second.post("/deployments", json={"app": "api", "cluster": "c1"})).status == 201

    repeat = webhook(alert(OFF, "c1", 5))
    assert (await second.post("/alerts", json=repeat)).status == 200
    assert await statuses(second) == {"c1": "OFFLINE"}
    apps = {a["name"]: a["status"] for a in await (await second.get("/apps")).json()}
    assert apps == {"web": "DEGRADED", "api": "DEGRADED"}
    refused = await second.post("/deployments", json={"app": "api", "cluster": "c1"})
    assert refused.status == 409


async def test_an_entry_that_cannot_be_read_keeps_its_cluster_as_it_was(
    make_client: MakeClient, aiohttp_server: Any
) -> None:
    first = await make_client()
    both = webhook(alert(OFF, "c1", 5), alert(ON, "c2", 0))
    assert (await first.post("/alerts", json=both)).status == 200
    entries: list[object] = [
        {"labels": {"alertname": OFF, "cluster": "c1"}, "startsAt": "not a time"},
    ]
    listing = await aiohttp_server(fake_alertmanager(entries))
    second = await make_client(
        alertmanager_urls=(f"http://127.0.0.1:{listing.port}",),
        reconcile_interval_s=3600,
        min_uptime_s=0,
    )
    await poll(
        lambda: statuses(second),
        lambda s: s["c2"] == "UNKNOWN",
        10,
        "c2 resolved (listed by no one)",
    )
    assert await statuses(second) == {"c1": "OFFLINE", "c2": "UNKNOWN"}
