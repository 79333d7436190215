"""Why a cluster has its status (``reactor.reasons``): the last failure reason the status
alerts tell, and the storm guard or a silence holding an OFFLINE back.

First the pure rules as tables, then a reactor (SQLite, and PostgreSQL when live) told by
webhooks and by reconciling with a small server in Alertmanager's place, answering
``GET /clusters`` and ``GET /clusters/{name}`` with ``reason``, ``reason_class``,
``offline_held_by`` and ``note``.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from reactor.reasons import (
    SILENCE,
    STORM_GUARD,
    ClusterNote,
    Listed,
    Told,
    held_note,
    listing_notes,
    note_rows,
    told,
    webhook_notes,
)
from reactor.statemachine import AlertState, ClusterAlertState, Status, StatusAlert
from tests.helpers.etcd_poll import poll
from tests.helpers.reactor_helpers import MakeClient
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, at, webhook

ON, OFF = StatusAlert.ONLINE, StatusAlert.OFFLINE
TIMEOUT = Told("timeout", "unreachable")
REFUSED = Told("unauthorized", "credentials")
CLEARED = Told(None, None)
CLUSTER = {"endpoint": "https://c:6443", "kubeconfig_secret_ref": "c"}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, None),  # no annotations: nothing told
        ({"summary": "x"}, None),  # rules older than the reason annotations
        ({"reason": "", "reason_class": ""}, CLEARED),  # its last probe succeeded
        ({"reason": " timeout ", "reason_class": "unreachable"}, TIMEOUT),
        ({"reason": "x" * 500}, Told("x" * 200 + "...", None)),  # bounded
        ({"reason": "time\x00out\n", "reason_class": "\x1b[31m"}, Told("timeout", "[31m")),
    ],
)
def test_what_the_annotations_tell(
    annotations: dict[str, str] | None, expected: Told | None
) -> None:
    assert told(annotations) == expected


def state(online: int | None = None, offline: int | None = None) -> ClusterAlertState:
    return ClusterAlertState(
        online=None if online is None else AlertState(True, online),
        offline=None if offline is None else AlertState(True, offline),
    )


@pytest.mark.parametrize(
    ("signals", "states", "expected"),
    [
        # the live ONLINE instance tells the reason of a failure below the threshold
        ([("c", ON, True, 10, TIMEOUT)], {"c": state(online=10)}, [ClusterNote("c", TIMEOUT)]),
        # an older instance delivered late tells nothing
        ([("c", ON, True, 5, TIMEOUT)], {"c": state(online=10)}, []),
        # a resolved alert tells nothing
        ([("c", ON, False, 10, TIMEOUT)], {"c": state(online=10)}, []),
        # a delivered OFFLINE tells its reason and clears the hold
        (
            [("c", ON, True, 10, CLEARED), ("c", OFF, True, 20, REFUSED)],
            {"c": state(online=10, offline=20)},
            [ClusterNote("c", REFUSED, None, sets_held=True)],
        ),
        # no reason annotation: nothing to write
        ([("c", ON, True, 10, None)], {"c": state(online=10)}, []),
    ],
)
def test_what_a_webhook_tells(
    signals: list[Any], states: dict[str, ClusterAlertState], expected: list[ClusterNote]
) -> None:
    assert webhook_notes(signals, states) == expected


def test_a_listing_tells_the_latest_reason_and_names_the_hold() -> None:
    notes = listing_notes(
        [
            Listed("a", ON, 10, False, False, CLEARED),
            Listed("a", OFF, 20, True, False, TIMEOUT),  # inhibited: the storm guard
            Listed("b", OFF, 20, False, True, REFUSED),  # silenced
            Listed("c", ON, 10, False, False, None),
        ]
    )
    assert notes == [
        ClusterNote("a", TIMEOUT, STORM_GUARD, sets_held=True),
        ClusterNote("b", REFUSED, SILENCE, sets_held=True),
        ClusterNote("c", None, None, sets_held=True),
    ]


def test_rows_change_only_what_differs() -> None:
    stored = {"a": (1, "timeout", "unreachable", None), "b": (2, None, None, STORM_GUARD)}
    notes = [
        ClusterNote("a", TIMEOUT),
        ClusterNote("b", None, None, sets_held=True),
        ClusterNote("x", TIMEOUT),
    ]
    assert note_rows(notes, stored) == [(2, None, None, None)]


@pytest.mark.parametrize(
    ("status", "held", "words"),
    [
        (Status.UNKNOWN, STORM_GUARD, "storm guard"),
        (Status.ONLINE, SILENCE, "silenced"),
        (Status.OFFLINE, STORM_GUARD, None),  # OFFLINE for the reactor: nothing held back
        (Status.UNKNOWN, None, None),
    ],
)
def test_the_hold_in_words(status: Status, held: str | None, words: str | None) -> None:
    note = held_note(status, held)
    assert (note is None) if words is None else (words in (note or ""))


def reasoned(name: str, cluster: str, starts: float, reason: str, kind: str) -> dict[str, Any]:
    body = alert(name, cluster, starts)
    body["annotations"] |= {"reason": reason, "reason_class": kind, "seen_by": "x:1"}
    return body


async def test_a_webhook_tells_the_reason_and_the_api_keeps_it(make_client: MakeClient) -> None:
    client = await make_client()
    assert (await client.post("/clusters", json={"name": "c1", **CLUSTER})).status == 201
    failing = webhook(reasoned(ONLINE, "c1", 0, "timeout", "unreachable"))
    assert (await client.post("/alerts", json=failing)).status == 200
    got = await (await client.get("/clusters/c1")).json()
    assert (got["status"], got["reason"], got["reason_class"]) == (
        "ONLINE",
        "timeout",
        "unreachable",
    )
    assert got["offline_held_by"] is None and got["note"] is None
    # the repeat of the same instance, its probe now refused: annotations change in place
    refused = webhook(reasoned(ONLINE, "c1", 0, "unauthorized", "credentials"))
    assert (await client.post("/alerts", json=refused)).status == 200
    listed = {c["name"]: c for c in await (await client.get("/clusters")).json()}
    assert listed["c1"]["reason"] == "unauthorized"
    assert listed["c1"]["reason_class"] == "credentials"
    # answered again: the reason clears
    ok = webhook(reasoned(ONLINE, "c1", 0, "", ""))
    assert (await client.post("/alerts", json=ok)).status == 200
    got = await (await client.get("/clusters/c1")).json()
    assert (got["reason"], got["reason_class"]) == (None, None)


def listed_entry(name: str, cluster: str, starts: float, **status: Any) -> dict[str, Any]:
    raw = reasoned(name, cluster, starts, "timeout", "unreachable")
    state = "suppressed" if status.get("inhibitedBy") or status.get("silencedBy") else "active"
    return {
        "labels": raw["labels"],
        "annotations": raw["annotations"],
        "startsAt": at(starts)[:23] + "Z",
        "endsAt": at(starts + 60)[:23] + "Z",
        "fingerprint": raw["fingerprint"],
        "status": {"state": state, "inhibitedBy": [], "silencedBy": [], **status},
    }


async def test_reconciliation_says_the_storm_guard_holds_an_offline_back(
    make_client: MakeClient, aiohttp_server: Any
) -> None:
    entries = [
        listed_entry(OFFLINE, "c1", 5, inhibitedBy=["f00d"]),  # the storm guard
        listed_entry(OFFLINE, "c2", 5, silencedBy=["beef"]),  # maintenance
        listed_entry(ONLINE, "c3", 0),
    ]

    async def alerts(_: web.Request) -> web.Response:
        return web.json_response(entries)

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"uptime": "2020-01-01T00:00:00Z"})

    app = web.Application()
    app.router.add_get("/api/v2/alerts", alerts)
    app.router.add_get("/api/v2/status", status)
    am = await aiohttp_server(app)
    first = await make_client()  # the clusters exist before the reconciliation at start
    for name in ("c1", "c2"):
        assert (await first.post("/clusters", json={"name": name, **CLUSTER})).status == 201
    client = await make_client(
        alertmanager_urls=(f"http://127.0.0.1:{am.port}",),
        reconcile_interval_s=3600,
        min_uptime_s=0,
    )

    async def clusters() -> dict[str, Any]:
        return {c["name"]: c for c in await (await client.get("/clusters")).json()}

    def told_all(c: dict[str, Any]) -> bool:
        return len(c) == 3 and all(x["reason"] for x in c.values())

    got = await poll(clusters, told_all, 10, "reasons told by the listing")
    # c3's ONLINE created it (source alerts) and its reason came with it
    assert got["c3"]["status"] == "ONLINE" and got["c3"]["offline_held_by"] is None
    # c1: FleetClusterOffline inhibited by the storm guard; c2 silenced: not OFFLINE for
    # the reactor, and the answer says why in words
    assert got["c1"]["status"] == "UNKNOWN" and got["c1"]["offline_held_by"] == "storm_guard"
    assert "storm guard" in got["c1"]["note"] and "allows deployments" in got["c1"]["note"]
    assert got["c2"]["offline_held_by"] == "silence" and "silenced" in got["c2"]["note"]
    assert got["c1"]["reason"] == "timeout" and got["c1"]["reason_class"] == "unreachable"
    one = await (await client.get("/clusters/c1")).json()
    assert one["note"] == got["c1"]["note"]


def test_status_shows_the_reason_column_and_the_storm_guard_note() -> None:
    from datetime import UTC, datetime

    from fleetwatch.cli.status import render_status

    note = held_note(Status.UNKNOWN, STORM_GUARD)
    base = {"status_since": None, "source": "discovery", "outage_since": None, "note": None}
    clusters = [
        {**base, "name": "a", "status": "ONLINE", "reason": None, "reason_class": None},
        {
            **base,
            "name": "b",
            "status": "ONLINE",
            "reason": "timeout",
            "reason_class": "unreachable",
        },
        {
            **base,
            "name": "c",
            "status": "UNKNOWN",
            "reason": "connect",
            "reason_class": None,
            "note": note,
        },
    ]
    lines = render_status(clusters, [], datetime.now(UTC)).splitlines()
    assert lines[0].split() == ["CLUSTER", "STATUS", "SINCE", "SOURCE", "OUTAGE", "REASON"]
    assert lines[1].split()[-1] == "-"
    assert lines[2].endswith("timeout (unreachable)")
    assert lines[3].split()[:2] == ["c", "UNKNOWN*"]
    assert lines[4] == f"* c: {note}"
