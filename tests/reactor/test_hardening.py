"""What an attacker or an unlucky operator tried, and what the reactor must do about it.

Each test here failed before its fix: a ``startsAt`` far in the future poisoning a cluster
for good, four inputs that answered 500 (with a traceback in the log), timestamps with
non-ASCII digits, a resolved alert whose ``endsAt`` is before its ``startsAt``, and no way
for an operator to remove a cluster or clear its alert state.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reactor_helpers import AUTH, TOKEN, MakeClient, dump_db
from reactor_payloads import OFFLINE, ONLINE, alert, at, webhook

LATE = "9999-12-31T23:59:59Z"


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def fleet(client: Any, headers: dict[str, str] | None = None) -> None:
    """c1 ONLINE since T0 with a1 DEPLOYED and p1 PENDING; c2 ONLINE with b1 DEPLOYED."""
    for name in ("c1", "c2"):
        body = {"name": name, "endpoint": f"https://{name}:6443", "kubeconfig_secret_ref": name}
        assert (await client.post("/clusters", json=body, headers=headers)).status == 201
    for app, cluster in (("a1", "c1"), ("p1", "c1"), ("b1", "c2")):
        body = {"name": app, "cluster": cluster}
        assert (await client.post("/apps", json=body, headers=headers)).status == 201
        if app != "p1":
            body = {"app": app, "cluster": cluster}
            assert (await client.post("/deployments", json=body, headers=headers)).status == 201
    online = webhook(alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
    assert (await client.post("/alerts", json=online, headers=headers)).status == 200


async def notify(client: Any, *alerts: dict[str, Any], headers: Any = None) -> dict[str, Any]:
    resp = await client.post("/alerts", json=webhook(*alerts), headers=headers)
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def status(client: Any, name: str) -> str:
    cluster: dict[str, Any] = await (await client.get(f"/clusters/{name}")).json()
    return str(cluster["status"])


async def app_status(client: Any, name: str) -> tuple[str, str | None]:
    app = await (await client.get(f"/apps/{name}")).json()
    return app["status"], app["reason"]


def with_starts(one: dict[str, Any], starts: str, ends: str | None = None) -> dict[str, Any]:
    one["startsAt"] = starts
    if ends is not None:
        one["endsAt"] = ends
    return one


# -- point 3: a startsAt far in the future --------------------------------------------


async def test_a_future_offline_is_skipped_and_a_real_outage_still_cascades(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the OFFLINE of year 9999 opened an outage that no ONLINE could ever close."""
    client = await make_client()
    await fleet(client)
    before = dump_db(db_path)
    with caplog.at_level(logging.INFO):
        result = await notify(client, with_starts(alert(OFFLINE, "c1", 0), LATE))
    assert (result["applied"], result["skipped"]) == (0, 1)
    assert dump_db(db_path) == before
    lines = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert any("in the future" in line and "--alerts.max-future-skew" in line for line in lines)

    # The real outage and the real recovery still work.
    assert (await notify(client, alert(OFFLINE, "c1", 5)))["apps_degraded"] == 1
    assert (await notify(client, alert(OFFLINE, "c1", 5, 9), alert(ONLINE, "c1", 9)))[
        "apps_restored"
    ] == 1
    assert await status(client, "c1") == "ONLINE"
    assert await app_status(client, "a1") == ("DEPLOYED", None)


async def test_a_future_online_is_skipped_and_a_real_offline_still_wins(
    make_client: MakeClient,
) -> None:
    """Before: an ONLINE of year 9999 meant no real OFFLINE could ever win."""
    client = await make_client()
    await fleet(client)
    assert (await notify(client, with_starts(alert(ONLINE, "c1", 0), LATE)))["skipped"] == 1
    assert (await notify(client, alert(OFFLINE, "c1", 5)))["apps_degraded"] == 1
    assert await status(client, "c1") == "OFFLINE"


async def test_the_future_skew_is_bounded_by_a_setting(make_client: MakeClient) -> None:
    """Within the skew (clocks of Prometheus and the reactor differ a little): applied."""
    client = await make_client(max_future_skew_s=600.0)
    now = datetime.now(UTC)
    near = with_starts(alert(ONLINE, "c1", 0), rfc3339(now + timedelta(minutes=5)))
    far = with_starts(alert(ONLINE, "c2", 0), rfc3339(now + timedelta(minutes=15)))
    result = await notify(client, near, far)
    assert (result["applied"], result["skipped"]) == (1, 1)
    assert await status(client, "c1") == "ONLINE"
    assert (await client.get("/clusters/c2")).status == 404  # never stored, not even created


# -- point 7: timestamps ----------------------------------------------------------------


@pytest.mark.parametrize(
    "starts",
    [
        "\uff12\uff10\uff12\uff16-11-30T02:00:00Z",  # fullwidth digits
        "2026-11-30T0\u0662:00:00Z",  # an Arabic-Indic digit
        "2026-11-30T02:00:00.\uff11Z",
        "2026-11-30T02:00:00+0\u0661:00",
    ],
)
async def test_timestamps_with_non_ascii_digits_are_400(
    make_client: MakeClient, db_path: Path, starts: str
) -> None:
    """Before: Python's \\d matched every Unicode digit, and int() read them."""
    client = await make_client()
    await fleet(client)
    before = dump_db(db_path)
    body = webhook(with_starts(alert(OFFLINE, "c1", 5), starts))
    resp = await client.post("/alerts", json=body)
    assert resp.status == 400
    assert "alerts[0].startsAt is not an RFC 3339 timestamp" in (await resp.json())["error"]
    assert dump_db(db_path) == before


async def test_a_resolved_alert_ending_before_it_started_is_skipped(
    make_client: MakeClient, db_path: Path
) -> None:
    """Before: "Online resolved at T0+1, started at T0+5" was stored and ended the ONLINE."""
    client = await make_client()
    await fleet(client)
    before = dump_db(db_path)
    result = await notify(client, with_starts(alert(ONLINE, "c1", 0, 1), at(5), at(1)))
    assert (result["applied"], result["skipped"]) == (0, 1)
    assert dump_db(db_path) == before
    assert await status(client, "c1") == "ONLINE"


# -- point 4: four inputs that answered 500 ---------------------------------------------


async def raw_request(client: Any, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client library would send some of these headers)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert record.levelno < logging.ERROR, record.getMessage()


async def test_a_body_declared_gzip_that_is_not_gzip_is_400(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    await fleet(client)
    before = dump_db(db_path)
    body = json.dumps(webhook(alert(OFFLINE, "c1", 5))).encode()
    with caplog.at_level(logging.INFO):
        for path in ("/alerts", "/apps", "/deployments"):
            headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
            resp = await client.post(path, data=body, headers=headers)
            assert resp.status == 400, (path, await resp.text())
            assert "not gzip data as its Content-Encoding says" in (await resp.json())["error"]
    assert dump_db(db_path) == before
    no_traceback(caplog)


async def test_a_json_number_of_thousands_of_digits_is_400(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    await fleet(client)
    before = dump_db(db_path)
    huge = "9" * 5000
    with caplog.at_level(logging.INFO):
        for path, body in (
            ("/alerts", f'{{"version": "4", "alerts": [], "truncatedAlerts": {huge}}}'),
            ("/apps", f'{{"name": "n", "cluster": {huge}}}'),
        ):
            resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
            assert resp.status == 400, (path, await resp.text())
            assert "number" in (await resp.json())["error"]
    assert dump_db(db_path) == before
    no_traceback(caplog)


@pytest.mark.parametrize("endpoint", ["https://[::1", "https://[::1]:99999", "https://h:port"])
async def test_an_endpoint_that_urlsplit_refuses_is_400(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture, endpoint: str
) -> None:
    client = await make_client()
    before = dump_db(db_path)
    body = {"name": "x", "endpoint": endpoint, "kubeconfig_secret_ref": "x"}
    with caplog.at_level(logging.INFO):
        resp = await client.post("/clusters", json=body)
    assert resp.status == 400, await resp.text()
    assert '"endpoint" must be an http(s) URL' in (await resp.json())["error"]
    assert dump_db(db_path) == before
    no_traceback(caplog)


async def test_an_authorization_header_with_non_ascii_bytes_is_401(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: 500 and a traceback per request, for anyone who could reach the reactor."""
    client = await make_client(token=TOKEN)
    await fleet(client, headers=AUTH)
    before = dump_db(db_path)
    body = json.dumps(webhook(alert(OFFLINE, "c1", 5))).encode()
    with caplog.at_level(logging.INFO):
        for credentials in (b"Bearer \xff\xfe", b"Bearer s3cr\xc3\xa9t", "Bearer ü".encode()):
            request = (
                b"POST /alerts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"Content-Type: application/json\r\nAuthorization: " + credentials + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            code, answer = await raw_request(client, request)
            assert code == 401, answer
            assert json.loads(answer) == {"error": "missing or wrong bearer token"}
    assert dump_db(db_path) == before
    no_traceback(caplog)
