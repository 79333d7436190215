"""The reactor's side of Alertmanager's API: credentials kept off the command line, and a
listing that cannot take the API down with it.

- ``--alertmanager.http-config.file`` (amtool's ``--http.config.file``, as Prometheus' HTTP
  client configuration): basic auth or an ``Authorization`` header, secrets read from
  files at each request, a strict parse whose errors name keys and never values.
- ``GET /api/v2/alerts`` asks for the status alerts only, reads at most
  ``--alertmanager.max-listing-bytes`` and parses off the event loop: while a 40 MB
  listing arrives, and while one within the bound is read, the API keeps answering.

The Alertmanagers here are small real HTTP servers in its place: an aiohttp app, or (for
the big listings) a server on its own thread, so that what it costs to *send* 40 MB is not
charged to the event loop whose stalls are measured.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from fleetwatch.cli import build_parser
from reactor.alertmanager.client import AlertmanagerClient, AlertmanagerError, Listing
from reactor.alertmanager.http import HTTPConfigError, parse_http_config
from reactor.app import create_app
from reactor.cli import settings_from
from reactor.context import ReactorSettings
from tests.helpers.etcd_poll import poll

S = 1_000_000
PASSWORD, TOKEN = "s3cret-Pa55", "t0ken-value"
UPTIME = {"uptime": "2020-01-01T00:00:00Z"}
UNSUPPORTED = "is not supported by the reactor (it reads basic_auth and authorization)"


# -- the file ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[]", "f.yml: the file must be a mapping"),
        ("basic_auth: {username: u, password: p}\nproxy_url: http://proxy:3128",
         f"f.yml: proxy_url {UNSUPPORTED}"),
        ("tls_config: {insecure_skip_verify: true}", f"f.yml: tls_config {UNSUPPORTED}"),
        ("basic_auth: {username: u, password: p, pasword_file: x}",
         "f.yml: unknown key basic_auth.pasword_file"),
        ("basic_auth: {password: p}", "f.yml: basic_auth.username must be a non-empty string"),
        ("basic_auth: {username: 'a:b', password: p}",
         "f.yml: basic_auth.username may not hold ':'"),
        ("basic_auth: {username: u}",
         "f.yml: basic_auth.password or basic_auth.password_file is required"),
        ("basic_auth: {username: u, password: p, password_file: pw}",
         "f.yml: basic_auth.password and basic_auth.password_file both set"),
        ("basic_auth: {username: u, password_file: missing}",
         "f.yml: basic_auth.password_file {base}/missing: No such file or directory"),
        ("basic_auth: {username: u, password: p}\nauthorization: {credentials: t}",
         "f.yml: basic_auth and authorization both set: give one"),
        ("authorization: {type: Basic, credentials: t}",
         "f.yml: authorization.type Basic: use basic_auth (as Prometheus requires)"),
        ("authorization: {type: 'Bearer x', credentials: t}",
         "f.yml: authorization.type must be one word, e.g. Bearer"),
        ("authorization: {credentials_file: missing}",
         "f.yml: authorization.credentials_file {base}/missing: No such file or directory"),
        ("basic_auth: [", "f.yml: not YAML (line 1)"),
    ],
)  # fmt: skip
def test_the_http_config_file_is_strict_and_names_keys_not_values(
    tmp_path: Path, text: str, error: str
) -> None:
    with pytest.raises(HTTPConfigError) as raised:
        parse_http_config(text, base=tmp_path, source="f.yml")
    assert str(raised.value) == error.format(base=tmp_path)
    assert "s3cret" not in str(raised.value)


def test_an_empty_file_sets_no_credentials(tmp_path: Path) -> None:
    assert parse_http_config("", base=tmp_path, source="f.yml") is None


def settings(argv: list[str]) -> ReactorSettings:
    return settings_from(build_parser().parse_args(["reactor", *argv]), {})


def test_the_flags_reach_the_settings_and_credentials_are_given_once(tmp_path: Path) -> None:
    (tmp_path / "password").write_text(PASSWORD + "\n")
    config = tmp_path / "am-http.yml"
    config.write_text("basic_auth: {username: fleetwatch, password_file: password}\n")
    s = settings(
        [
            "--alertmanager.url=http://127.0.0.1:9093",
            f"--alertmanager.http-config.file={config}",
            "--alertmanager.max-listing-bytes=4096",
        ]
    )
    assert s.alertmanager_auth is not None
    assert (
        s.alertmanager_auth.header()
        == "Basic " + base64.b64encode(f"fleetwatch:{PASSWORD}".encode()).decode()
    )
    assert s.alertmanager_max_listing_bytes == 4096
    assert PASSWORD not in repr(s)
    with pytest.raises(ValueError, match=r"carries credentials and --alertmanager\.http-config"):
        settings(
            [
                "--alertmanager.url=http://u:p@127.0.0.1:9093",
                f"--alertmanager.http-config.file={config}",
            ]
        )
    with pytest.raises(ValueError, match=r"max-listing-bytes must be at least 1024"):
        settings(["--alertmanager.max-listing-bytes=10"])


# -- what is sent ------------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.Response]]


async def uptime(_: web.Request) -> web.Response:
    return web.json_response(UPTIME)


async def alertmanager_api(aiohttp_server: Any, alerts: Handler, status: Handler = uptime) -> str:
    """The URL of an Alertmanager API that answers its alerts and status with these."""
    app = web.Application()
    app.router.add_get("/api/v2/alerts", alerts)
    app.router.add_get("/api/v2/status", status)
    server = await aiohttp_server(app)
    return f"http://127.0.0.1:{server.port}"


async def test_credentials_from_the_file_are_sent_and_follow_a_rotation(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    seen: list[tuple[str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("Authorization", "")))
        if request.path.endswith("/status"):
            return web.json_response({"uptime": "1970-01-01T00:00:05Z"})
        return web.json_response([])

    url = await alertmanager_api(aiohttp_server, handler, handler)
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    basic = parse_http_config(
        "basic_auth: {username: fleetwatch, password_file: password}",
        base=tmp_path,
        source="f.yml",
    )
    bearer = parse_http_config(
        "authorization: {credentials_file: token}", base=tmp_path, source="f.yml"
    )
    async with aiohttp.ClientSession() as session:
        client = AlertmanagerClient(url, session, timeout_s=2, auth=basic)
        assert await client.listing() == Listing((), started_at=5 * S)
        password.write_text("rotated-Pa55\n")  # read again at the next request
        await client.listing()
        await AlertmanagerClient(url, session, timeout_s=2, auth=bearer).listing()
        password.unlink()  # gone: a failure of that Alertmanager, naming no secret
        with pytest.raises(AlertmanagerError) as raised:
            await client.listing()
    assert str(raised.value) == (
        f"--alertmanager.http-config.file f.yml: {password}: No such file or directory"
    )

    def basic_of(secret: str) -> str:
        return "Basic " + base64.b64encode(f"fleetwatch:{secret}".encode()).decode()

    assert [header for _, header in seen] == [
        basic_of(PASSWORD),
        basic_of(PASSWORD),
        basic_of("rotated-Pa55"),
        basic_of("rotated-Pa55"),
        f"Bearer {TOKEN}",
        f"Bearer {TOKEN}",
    ]


async def test_only_the_status_alerts_are_asked_for(aiohttp_server: Any) -> None:
    asked: list[list[str]] = []

    async def alerts(request: web.Request) -> web.Response:
        asked.append(request.query.getall("filter"))
        return web.json_response([])

    url = await alertmanager_api(aiohttp_server, alerts)
    async with aiohttp.ClientSession() as session:
        await AlertmanagerClient(url, session, 2).listing()
    assert asked == [['alertname=~"FleetClusterOffline|FleetClusterOnline"']]


# -- big listings ------------------------------------------------------------------------


def listing_body(alerts: int, state: str = "active") -> bytes:
    """``alerts`` status alerts as Alertmanager 0.25 lists them (about 700 bytes each)."""
    entries = [
        {
            "annotations": {
                "summary": f"Cluster c{i} is ONLINE",
                "description": f"Status signal for the fleetwatch reactor: c{i} answered its "
                "last probe, or fewer than 2 probes in a row failed since it did.",
            },
            "endsAt": "2026-12-02T10:10:00.000Z",
            "fingerprint": f"{i:016x}",
            "receivers": [{"name": "fleetwatch-reactor"}],
            "startsAt": "2026-12-02T10:00:00.123Z",
            "status": {"inhibitedBy": [], "silencedBy": [], "state": state},
            "updatedAt": "2026-12-02T10:05:00.000Z",
            "generatorURL": "http://prometheus:9090/graph?g0.expr=cluster%3Afleetwatch_status"
            "%3Acode+%3D%3D+1&g0.tab=1",
            "labels": {"alertname": "FleetClusterOnline", "cluster": f"c{i}", "severity": "none"},
        }
        for i in range(alerts)
    ]
    return json.dumps(entries).encode()


class ThreadedAlertmanager:
    """An HTTP server on its own thread listing ``body``, once the test says ``go``:
    sending tens of megabytes costs the reactor's event loop nothing here."""

    def __init__(self, body: bytes, chunked: bool = False) -> None:
        self.go = threading.Event()
        listing, go = body, self.go

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # the standard library's name
                if self.path.startswith("/api/v2/status"):
                    self._send(json.dumps(UPTIME).encode())
                    return
                go.wait(10)
                self._send(listing)

            def _send(self, data: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for at in range(0, len(data), 1 << 20):
                        piece = data[at : at + (1 << 20)]
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ThreadedAlertmanager:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.go.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def big_listing() -> Iterator[bytes]:
    yield listing_body(60_000)  # about 42 MB


async def _longest_stall(client: TestClient[Any, Any], until: asyncio.Event) -> float:
    """The longest the event loop was held while ``until`` is not set, by a timer and by
    ``GET /-/healthy`` answered in turn."""
    longest = 0.0
    while not until.is_set():
        started = time.monotonic()
        await asyncio.sleep(0.005)
        longest = max(longest, time.monotonic() - started - 0.005)
        started = time.monotonic()
        assert (await client.get("/-/healthy")).status == 200
        longest = max(longest, time.monotonic() - started)
    return longest


def _parse_seconds(body: bytes) -> float:
    """What one ``json.loads`` of ``body`` takes in this process now: the least the loop
    was held when the listing was read on it. A stall bound is a share of it, so that it
    grows with the machine's load as the stall it guards against does (a fixed 0.15 s or
    0.4 s is a clock, not a behaviour)."""
    started = time.monotonic()
    json.loads(body)
    return time.monotonic() - started


async def _reconcile_once(
    aiohttp_client: Any, tmp_path: Path, am: ThreadedAlertmanager, **extra: Any
) -> tuple[float, CollectorRegistry]:
    """Start a reactor reconciling with ``am``, let ``am`` answer, and measure the longest
    stall of the loop until that reconciliation has ended (succeeded or failed)."""
    registry = CollectorRegistry()
    settings = ReactorSettings(
        db_path=tmp_path / "state.db",
        alertmanager_urls=(am.url,),
        reconcile_interval_s=3600,  # once, at start
        min_uptime_s=0,
        **extra,
    )
    client: TestClient[Any, Any] = await aiohttp_client(create_app(settings, registry=registry))
    name = am.url.removeprefix("http://")

    async def ended() -> float:
        failures = registry.get_sample_value(
            "fleetwatch_reactor_reconcile_failures_total", {"alertmanager": name}
        )
        success = registry.get_sample_value(
            "fleetwatch_reactor_reconcile_last_success_timestamp_seconds"
        )
        return (failures or 0.0) + (success or 0.0)

    # As `fleetwatch reactor` does once started (reactor.cli): what start-up built is kept
    # out of the garbage collector's full collections, which hold the GIL whichever thread
    # runs them. Here "start-up" is also pytest and every module of the suite.
    gc.freeze()
    done = asyncio.Event()
    watcher = asyncio.create_task(_longest_stall(client, done), name="stall-watcher")
    am.go.set()
    try:
        await poll(ended, lambda v: v > 0, 60, "the reconciliation ended")
    finally:
        done.set()
        gc.unfreeze()
    return await watcher, registry


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_40_mb_listing_is_refused_unread_and_the_api_keeps_answering(
    aiohttp_client: Any, tmp_path: Path, big_listing: bytes, chunked: bool
) -> None:
    with ThreadedAlertmanager(big_listing, chunked=chunked) as am:
        stall, registry = await _reconcile_once(aiohttp_client, tmp_path, am)
    name = am.url.removeprefix("http://")
    failures = registry.get_sample_value(
        "fleetwatch_reactor_reconcile_failures_total", {"alertmanager": name}
    )
    assert failures == 1
    parse_s = _parse_seconds(big_listing)
    print(f"\nlongest stall while a 42 MB listing was refused: {stall:.3f}s (parse {parse_s:.3f}s)")
    assert stall < parse_s / 4, f"the event loop was held {stall:.3f}s"


async def test_a_listing_within_a_raised_bound_is_read_off_the_event_loop(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """60,000 alerts, all silenced (no news: what is measured is reading the listing, not
    writing 60,000 clusters). Before, one ``json.loads`` held the GIL and the entries were
    read on the loop: 0.9-1.0 s without an answer."""
    body = listing_body(60_000, state="suppressed")
    with ThreadedAlertmanager(body) as am:
        stall, registry = await _reconcile_once(
            aiohttp_client, tmp_path, am, alertmanager_max_listing_bytes=64 * 1024 * 1024
        )
    parse_s = _parse_seconds(body)
    assert registry.get_sample_value("fleetwatch_reactor_reconcile_last_success_timestamp_seconds")
    assert registry.get_sample_value("fleetwatch_reactor_reconcile_changes_total") == 0
    # What is left on the loop is the garbage collector's pauses (a full collection holds
    # the GIL, whichever thread runs it) and, on a loaded machine, the scheduler's.
    print(f"\nlongest stall while a 42 MB listing was read: {stall:.3f}s (parse {parse_s:.3f}s)")
    assert stall < parse_s / 2, f"the event loop was held {stall:.3f}s"


async def test_the_bound_names_its_flag(aiohttp_server: Any) -> None:
    async def alerts(_: web.Request) -> web.Response:
        return web.json_response([{"labels": {"alertname": "x" * 2000}}])

    url = await alertmanager_api(aiohttp_server, alerts)
    async with aiohttp.ClientSession() as session:
        client = AlertmanagerClient(url, session, 2, max_bytes=1024)
        with pytest.raises(AlertmanagerError) as raised:
            await client.listing()
    assert str(raised.value) == (
        "/api/v2/alerts: the answer is larger than 1024 bytes, not read "
        "(--alertmanager.max-listing-bytes)"
    )


async def test_credentials_in_the_url_get_a_warning_that_shows_none_of_them(
    aiohttp_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    settings = ReactorSettings(
        db_path=tmp_path / "state.db",
        alertmanager_urls=("http://admin:hunter2@127.0.0.1:9/",),
        reconcile_interval_s=3600,
    )
    await aiohttp_client(create_app(settings, registry=CollectorRegistry()))
    said = [r.getMessage() for r in caplog.records if "carries credentials" in r.getMessage()]
    assert said == [
        "--alertmanager.url 127.0.0.1:9 carries credentials, which the command line shows to "
        "every user of the machine (ps): put them in --alertmanager.http-config.file"
    ]
    assert "hunter2" not in caplog.text
