"""What an attacker or an unlucky operator tried, and what the reactor must do about it.

Each test here failed before its fix: a ``startsAt`` far in the future poisoning a cluster
for good, four inputs that answered 500 (with a traceback in the log), timestamps with
non-ASCII digits, a resolved alert whose ``endsAt`` is before its ``startsAt``, and no way
for an operator to remove a cluster or clear its alert state.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.cli import build_parser, main
from fleetwatch.procs import wait_until
from reactor.cli import settings_from
from tests.helpers.reactor_helpers import AUTH, TOKEN, MakeClient, dump_db
from tests.helpers.reactor_live import reactor_process
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, at, webhook

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


@contextmanager
def refused_quietly(db_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """What runs inside changes nothing in the database and logs no error or traceback."""
    before = dump_db(db_path)
    with caplog.at_level(logging.INFO):
        yield
    assert dump_db(db_path) == before
    no_traceback(caplog)


async def test_a_body_declared_gzip_that_is_not_gzip_is_400(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    await fleet(client)
    body = json.dumps(webhook(alert(OFFLINE, "c1", 5))).encode()
    with refused_quietly(db_path, caplog):
        for path in ("/alerts", "/apps", "/deployments"):
            headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
            resp = await client.post(path, data=body, headers=headers)
            assert resp.status == 400, (path, await resp.text())
            assert "not gzip data as its Content-Encoding says" in (await resp.json())["error"]


async def test_a_json_number_of_thousands_of_digits_is_400(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    await fleet(client)
    huge = "9" * 5000
    with refused_quietly(db_path, caplog):
        for path, body in (
            ("/alerts", f'{{"version": "4", "alerts": [], "truncatedAlerts": {huge}}}'),
            ("/apps", f'{{"name": "n", "cluster": {huge}}}'),
        ):
            resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
            assert resp.status == 400, (path, await resp.text())
            assert "number" in (await resp.json())["error"]


@pytest.mark.parametrize("endpoint", ["https://[::1", "https://[::1]:99999", "https://h:port"])
async def test_an_endpoint_that_urlsplit_refuses_is_400(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture, endpoint: str
) -> None:
    client = await make_client()
    body = {"name": "x", "endpoint": endpoint, "kubeconfig_secret_ref": "x"}
    with refused_quietly(db_path, caplog):
        resp = await client.post("/clusters", json=body)
        assert resp.status == 400, await resp.text()
        assert '"endpoint" must be an http(s) URL' in (await resp.json())["error"]


async def test_an_authorization_header_with_non_ascii_bytes_is_401(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: 500 and a traceback per request, for anyone who could reach the reactor."""
    client = await make_client(token=TOKEN)
    await fleet(client, headers=AUTH)
    body = json.dumps(webhook(alert(OFFLINE, "c1", 5))).encode()
    with refused_quietly(db_path, caplog):
        for credentials in (b"Bearer \xff\xfe", b"Bearer s3cr\xc3\xa9t", "Bearer ü".encode()):
            request = (
                b"POST /alerts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"Content-Type: application/json\r\nAuthorization: " + credentials + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            code, answer = await raw_request(client, request)
            assert code == 401, answer
            assert json.loads(answer) == {"error": "missing or wrong bearer token"}


async def test_a_body_in_gzip_is_read_and_a_gzip_bomb_is_413(
    make_client: MakeClient, db_path: Path
) -> None:
    """Decoding is ours now (aiohttp's is off): real gzip still works, its size is bounded."""
    client = await make_client(max_body_bytes=64 * 1024)
    await fleet(client)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    body = gzip.compress(json.dumps(webhook(alert(OFFLINE, "c1", 5))).encode())
    resp = await client.post("/alerts", data=body, headers=headers)
    assert resp.status == 200 and (await resp.json())["apps_degraded"] == 1
    before = dump_db(db_path)
    bomb = gzip.compress(b" " * (10 * 1024 * 1024))  # 10 KiB that would be 10 MiB
    assert len(bomb) < 64 * 1024
    resp = await client.post("/alerts", data=bomb, headers=headers)
    assert resp.status == 413 and "65536 bytes" in (await resp.json())["error"]
    for coding, message in (("br", "'br' is not supported"), ("deflate", "not deflate data")):
        resp = await client.post("/alerts", data=body, headers={"Content-Encoding": coding})
        assert resp.status == 400 and message in (await resp.json())["error"]
    resp = await client.post("/alerts", data=body[:-8], headers=headers)
    assert resp.status == 400 and "cut short" in (await resp.json())["error"]
    assert dump_db(db_path) == before


# -- the repair path: DELETE /clusters/{name} and DELETE /clusters/{name}/alerts ----------


async def test_delete_a_cluster_refuses_to_orphan_apps_unless_forced(
    make_client: MakeClient, db_path: Path
) -> None:
    """Before: no way to remove a decommissioned cluster (405)."""
    client = await make_client(token=TOKEN)
    await fleet(client, headers=AUTH)
    await notify(client, alert(OFFLINE, "c1", 5), headers=AUTH)  # an outage to delete too
    before = dump_db(db_path)
    assert (await client.delete("/clusters/c1")).status == 401
    assert (await client.delete("/clusters/c1?force=true")).status == 401
    resp = await client.delete("/clusters/c1", headers=AUTH)
    assert resp.status == 409
    assert "carries 2 app(s)" in (await resp.json())["error"]
    resp = await client.delete("/clusters/c1?force=yes", headers=AUTH)
    assert resp.status == 400
    assert dump_db(db_path) == before

    resp = await client.delete("/clusters/c1?force=true", headers=AUTH)
    assert resp.status == 200
    assert await resp.json() == {"deleted": "c1", "apps_deleted": 2}
    assert (await client.get("/clusters/c1")).status == 404
    assert [a["name"] for a in await (await client.get("/apps")).json()] == ["b1"]
    after = dump_db(db_path)
    assert [row[1] for row in after["clusters"]] == ["c2"]
    assert after["outages"] == []

    # A cluster without apps needs no force; a status alert naming it later creates it anew.
    resp = await client.patch("/apps/b1", json={"cluster": "c2"}, headers=AUTH)
    assert (await client.post("/apps", json={"name": "x", "cluster": "c2"}, headers=AUTH)).ok
    resp = await client.delete("/clusters/c2", headers=AUTH)
    assert resp.status == 409
    body = {"name": "c3", "endpoint": "https://c3:6443", "kubeconfig_secret_ref": "c3"}
    assert (await client.post("/clusters", json=body, headers=AUTH)).status == 201
    resp = await client.delete("/clusters/c3", headers=AUTH)
    assert await resp.json() == {"deleted": "c3", "apps_deleted": 0}
    await notify(client, alert(ONLINE, "c1", 30), headers=AUTH)
    c1 = await (await client.get("/clusters/c1")).json()
    assert (c1["status"], c1["source"]) == ("ONLINE", "alerts")


async def test_clearing_the_alert_state_repairs_a_poisoned_cluster(
    make_client: MakeClient,
) -> None:
    """A state no alert can fix (here made as the reactor made it before the skew check:
    an OFFLINE of year 9999) is repaired by DELETE /clusters/{name}/alerts. Before: 405."""
    client = await make_client(token=TOKEN, max_future_skew_s=1e12)
    await fleet(client, headers=AUTH)
    await notify(client, with_starts(alert(OFFLINE, "c1", 0), LATE), headers=AUTH)
    await notify(client, alert(ONLINE, "c1", 9), headers=AUTH)  # cannot close that outage
    assert await status(client, "c1") == "OFFLINE"
    assert await app_status(client, "a1") == ("DEGRADED", "cluster_offline")

    assert (await client.delete("/clusters/c1/alerts")).status == 401
    resp = await client.delete("/clusters/c1/alerts", headers=AUTH)
    assert resp.status == 200
    answer = await resp.json()
    assert (answer["outages_closed"], answer["apps_restored"]) == (1, 1)
    assert answer["cluster"]["status"] == "UNKNOWN"
    assert answer["cluster"]["outage_since"] is None
    assert await app_status(client, "a1") == ("DEPLOYED", None)
    assert await app_status(client, "p1") == ("PENDING", None)

    # "Had been ONLINE" is kept: the real OFFLINE that comes next cascades, and the real
    # ONLINE after it restores.
    assert (await notify(client, alert(OFFLINE, "c1", 20), headers=AUTH))["apps_degraded"] == 1
    assert (await notify(client, alert(ONLINE, "c1", 25), headers=AUTH))["apps_restored"] == 1
    assert await status(client, "c1") == "ONLINE"
    # Clearing a healthy cluster: UNKNOWN, nothing else; the next ONLINE repeat heals it.
    answer = await (await client.delete("/clusters/c2/alerts", headers=AUTH)).json()
    assert (answer["cluster"]["status"], answer["outages_closed"]) == ("UNKNOWN", 0)
    await notify(client, alert(ONLINE, "c2", 0), headers=AUTH)
    assert await status(client, "c2") == "ONLINE"


async def test_fleetwatch_cluster_delete_and_reset(
    make_client: MakeClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repair path from the command line, names with a "/" included (sent as %2F)."""
    client = await make_client(token=TOKEN)
    await fleet(client, headers=AUTH)
    body = {"name": "team/a", "endpoint": "https://a:6443", "kubeconfig_secret_ref": "a"}
    assert (await client.post("/clusters", json=body, headers=AUTH)).status == 201
    await notify(client, alert(OFFLINE, "c1", 5), headers=AUTH)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    url = str(client.make_url("/"))

    async def fleetwatch(*argv: str) -> tuple[int, str, str]:
        args = [*argv, "--reactor", url, "--web.token-file", str(token_file)]
        code = await asyncio.to_thread(main, args)
        out, err = capsys.readouterr()
        return code, out, err

    code, _, err = await fleetwatch("cluster", "delete", "c1")
    assert code == 1 and "refused (409)" in err and "carries 2 app(s)" in err
    code, out, _ = await fleetwatch("cluster", "reset", "c1")
    assert code == 0
    assert (
        out
        == "cluster c1: alert state cleared, now UNKNOWN; 1 outage(s) closed, 1 app(s) restored\n"
    )
    code, out, _ = await fleetwatch("cluster", "delete", "c1", "--force")
    assert (code, out) == (0, "cluster c1 deleted, with 2 app(s)\n")
    code, out, _ = await fleetwatch("cluster", "reset", "team/a")
    assert code == 0 and "now UNKNOWN" in out
    code, out, _ = await fleetwatch("cluster", "delete", "team/a")
    assert (code, out) == (0, "cluster team/a deleted, with 0 app(s)\n")
    code, _, err = await fleetwatch("cluster", "delete", "team/a")
    assert code == 1 and "refused (404): cluster 'team/a' not found" in err
    token_file.write_text("wrong")
    code, _, err = await fleetwatch("cluster", "delete", "c2", "--force")
    assert code == 1 and "refused (401)" in err
    assert (await client.get("/clusters/c2")).status == 200


# -- the token file ------------------------------------------------------------------------


async def test_a_token_file_others_may_read_gets_a_warning(
    make_client: MakeClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a world-readable token file was taken without a word."""
    token_file = write_token_file(tmp_path, TOKEN, 0o644)
    with caplog.at_level(logging.WARNING):
        await make_client(token=TOKEN, token_file=token_file)
    warnings = [r.getMessage() for r in caplog.records if "readable by other" in r.getMessage()]
    assert warnings == [
        f"token file {token_file} is readable by other users (mode 0644): chmod 600 it "
        "(in Kubernetes, defaultMode: 0400 on the Secret volume)"
    ]
    caplog.clear()
    token_file.chmod(0o600)
    with caplog.at_level(logging.WARNING):
        await make_client(token=TOKEN, token_file=token_file)
    assert not [r for r in caplog.records if "readable by other" in r.getMessage()]


EMPTY = {"version": "4", "alerts": []}  # a notification that changes nothing


def write_token_file(folder: Path, text: str, mode: int = 0o600) -> Path:
    token_file = folder / "token"
    token_file.write_text(text)
    token_file.chmod(mode)
    return token_file


async def reading_token_file(make_client: MakeClient, folder: Path, text: str) -> tuple[Any, Path]:
    """A reactor taking the token of a file that holds ``text``, and that file."""
    token_file = write_token_file(folder, text)
    return await make_client(token=text.strip(), token_file=token_file), token_file


async def taken_until_warned(
    client: Any, headers: dict[str, str], caplog: pytest.LogCaptureFixture, words: str
) -> None:
    """Waits for a warning holding ``words``; the token in ``headers`` is taken all along."""
    deadline = time.monotonic() + 10
    while not [r for r in caplog.records if words in r.getMessage()]:
        assert time.monotonic() < deadline, f"no warning with {words!r}"
        assert (await client.post("/alerts", json=EMPTY, headers=headers)).status == 200
        await asyncio.sleep(0.05)


async def test_the_token_file_is_read_again_when_it_changes(
    make_client: MakeClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: read once at start; rotating the token needed a restart."""
    client, token_file = await reading_token_file(make_client, tmp_path, "first-token")
    first = {"Authorization": "Bearer first-token"}
    second = {"Authorization": "Bearer second-token"}
    assert (await client.post("/alerts", json=EMPTY, headers=first)).status == 200
    token_file.write_text("second-token")
    deadline = time.monotonic() + 10
    while (await client.post("/alerts", json=EMPTY, headers=second)).status != 200:
        assert time.monotonic() < deadline, "the new token was never taken"
        await asyncio.sleep(0.05)
    assert (await client.post("/alerts", json=EMPTY, headers=first)).status == 401

    # An empty (half-written) or vanished file keeps the last good token, with a warning.
    with caplog.at_level(logging.WARNING):
        token_file.write_text("")
        token_file.unlink()
        await taken_until_warned(client, second, caplog, "cannot be read")
    assert (await client.post("/alerts", json=EMPTY)).status == 401
    for record in caplog.records:
        assert "second-token" not in record.getMessage()


async def test_a_token_file_with_a_line_break_inside_keeps_the_last_good_token(
    make_client: MakeClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: "second-token\\nthird-token" became the token and locked everyone out, silently."""
    client, token_file = await reading_token_file(make_client, tmp_path, "second-token\n")
    good = {"Authorization": "Bearer second-token"}
    with caplog.at_level(logging.WARNING):
        token_file.write_text("second-token\nthird-token\n")
        await taken_until_warned(client, good, caplog, "line break")
    assert (await client.post("/alerts", json=EMPTY, headers=good)).status == 200
    for record in caplog.records:
        assert "third-token" not in record.getMessage()


@pytest.mark.live
def test_sighup_reads_the_token_file_again(tmp_path: Path) -> None:
    """A real ``fleetwatch reactor``: SIGHUP alone (no request in between, which would look at
    the file itself) takes the new token; the flag for the future skew is accepted."""
    token_file = write_token_file(tmp_path, "first-token")
    reactor, url = reactor_process(
        tmp_path,
        tmp_path / "state.db",
        f"--web.token-file={token_file}",
        "--alerts.max-future-skew=5m",
    )
    with reactor as proc:

        def post(token: str) -> int:
            request = urllib.request.Request(
                f"{url}/alerts",
                data=json.dumps(EMPTY).encode(),
                method="POST",
                headers={"Authorization": f"Bearer {token}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as resp:
                    return int(resp.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        assert post("first-token") == 200
        token_file.write_text("second-token")
        os.kill(proc.pid, signal.SIGHUP)
        wait_until(
            lambda: "the bearer token changed" in proc.log_tail(50),
            timeout=30,  # the machine is shared: minutes of load are seen
            what="the token re-read on SIGHUP",
        )
        assert (post("second-token"), post("first-token")) == (200, 401)
        assert proc.alive()
        log = proc.log_tail(200)
    assert "second-token" not in log and "first-token" not in log


@pytest.mark.parametrize(
    ("text", "seconds"), [("600", 600.0), ("30s", 30.0), ("10m", 600.0), ("1.5h", 5400.0)]
)
def test_the_future_skew_flag_takes_a_duration(text: str, seconds: float) -> None:
    args = build_parser().parse_args(["reactor", f"--alerts.max-future-skew={text}"])
    assert settings_from(args, {}).max_future_skew_s == seconds


@pytest.mark.parametrize("text", ["", "m", "ten", "-1m", "inf", "nan", "5d"])
def test_the_future_skew_flag_refuses_what_is_not_a_duration(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["reactor", f"--alerts.max-future-skew={text}"])
    assert "not a duration" in capsys.readouterr().err


def test_a_token_file_that_gives_no_token_stops_the_start(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    for content, message in ((b" \n", "is empty"), (b"\xff\xfe", "not UTF-8 text")):
        token_file.write_bytes(content)
        args = build_parser().parse_args(["reactor", f"--web.token-file={token_file}"])
        with pytest.raises(ValueError, match=message):
            settings_from(args, {})
    args = build_parser().parse_args(["reactor", f"--web.token-file={tmp_path / 'none'}"])
    with pytest.raises(ValueError, match="No such file"):
        settings_from(args, {})


async def test_a_path_name_no_cluster_or_app_can_have_is_404(
    make_client: MakeClient, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by test_fuzz on PostgreSQL: ``GET /clusters/%00`` was a 500 (psycopg refuses a
    NUL in a text parameter), with a traceback in the log."""
    client = await make_client()
    await fleet(client)
    with refused_quietly(db_path, caplog):
        for name in ("%00", "a%00b", "%0A", "%20c1", "x" * 300):
            for method, path in (
                ("GET", "/clusters/{}"),
                ("DELETE", "/clusters/{}"),
                ("DELETE", "/clusters/{}/alerts"),
                ("GET", "/apps/{}"),
                ("PATCH", "/apps/{}"),
            ):
                body = {"cluster": "c2"} if method == "PATCH" else None
                resp = await client.request(method, path.format(name), json=body)
                assert resp.status == 404, (method, path, name, await resp.text())
                assert "not found" in (await resp.json())["error"].lower()
