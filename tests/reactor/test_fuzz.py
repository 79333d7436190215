"""Property-based fuzz of a real reactor process: no 5xx, and a refused request changes nothing.

Hypothesis builds requests from near-valid Alertmanager webhooks (every field drawn from
valid values and garbage), arbitrary JSON and bytes, and API calls with odd names and
bodies, and headers and content codings (Authorization with any bytes, bodies declared
gzip or deflate that are or are not, cut short, or bombs). For each one: the answer is never
a 5xx, and when it is a 4xx (or a GET) the whole database is the same before and after; no
traceback reaches the reactor's log. Example counts are bounded to stay fast.
"""

from __future__ import annotations

import gzip
import http.client
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwatch.procs import free_port
from reactor.store.database import POSTGRESQL, SQLITE
from tests.helpers.reactor_helpers import POSTGRES_URL_SUFFIX, dump_db
from tests.helpers.reactor_live import reactor_process
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, ZERO_TIME, alert, at, webhook

pytestmark = pytest.mark.live

TOKEN = "fuzz-token"
CLUSTERS = ["c1", "c2", "c3"]
APPS = ["a1", "a2", "a3"]
FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Reactor:
    def __init__(self, port: int, db_path: Path) -> None:
        self.port = port
        self.db_path = db_path

    def request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def raw(
        self, method: str, path: str, body: bytes, headers: list[tuple[str, bytes]]
    ) -> tuple[int, bytes]:
        """Headers as bytes, sent as they are (``request`` would encode them as Latin-1)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()


@pytest.fixture(scope="module", params=[SQLITE, POSTGRESQL])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reactor]:
    """A reactor process on each store in turn (the PostgreSQL one on the session's server)."""
    folder = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    db_path = folder / "state.db"
    if request.param == POSTGRESQL:
        db_path = folder / f"state{POSTGRES_URL_SUFFIX}"
        db_path.write_text(request.getfixturevalue("postgres_server").create_database())
    token_file = folder / "token"
    token_file.write_text(TOKEN)
    proc, _ = reactor_process(
        folder,
        db_path,
        f"--web.token-file={token_file}",
        "--web.max-body-bytes=65536",
        "--log.level=error",
        port=port,
    )
    with proc:
        reactor = Reactor(port, db_path)
        auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        for name in CLUSTERS:
            body = {"name": name, "endpoint": f"https://{name}:6443", "kubeconfig_secret_ref": name}
            reactor.request("POST", "/clusters", json.dumps(body).encode(), auth)
        for app, cluster in zip(APPS, CLUSTERS, strict=True):
            reactor.request(
                "POST", "/apps", json.dumps({"name": app, "cluster": cluster}).encode(), auth
            )
            body = {"app": app, "cluster": cluster}
            reactor.request("POST", "/deployments", json.dumps(body).encode(), auth)
        online = webhook(alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
        reactor.request("POST", "/alerts", json.dumps(online).encode(), auth)
        yield reactor
        log = proc.log_tail(200)
    assert "Traceback" not in log, log


def check(reactor: Reactor, method: str, path: str, body: bytes | None, auth: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    before = dump_db(reactor.db_path)
    status, answer = reactor.request(method, path, body, headers)
    assert status < 500, (status, answer[:300])
    if status >= 400:
        assert "error" in json.loads(answer), answer[:300]
    if status >= 400 or method == "GET":
        assert dump_db(reactor.db_path) == before, (method, path, status)


# -- strategies ------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
garbage = st.none() | st.integers() | st.text(max_size=30) | st.lists(st.integers(), max_size=2)
timestamps = st.one_of(
    st.integers(min_value=0, max_value=600).map(lambda m: at(m / 10)),
    st.just(ZERO_TIME),
    st.sampled_from(
        [
            "2026-13-01T00:00:00Z",
            "2026-11-30T25:00:00Z",
            "2026-11-30T02:00:00+99:00",
            "0001-01-01T00:30:00+01:00",
            "9999-12-31T23:59:59.999999999-05:00",
            "2026-11-30 02:00:00Z",
            "2026-11-30T02:00:00",
            "9999-12-31T23:59:59Z",
            "\uff12\uff10\uff12\uff16-11-30T02:00:00Z",
            "2026-11-30T0\u0662:00:00Z",
        ]
    ),
    garbage,
)
minutes = st.integers(min_value=0, max_value=600).map(lambda m: m / 10)
status_alerts = st.builds(
    alert,
    st.sampled_from([ONLINE, ONLINE, OFFLINE, OFFLINE, "Watchdog"]),
    st.sampled_from([*CLUSTERS, "c-new", None]),
    minutes,
    st.none() | minutes,
)


def mutate(draw: Any, one: dict[str, Any]) -> None:
    """Leave an alert as Alertmanager sent it, or drop a key, or put garbage in one."""
    change = draw(st.sampled_from(["none", "none", "drop", "garbage", "labels"]))
    key = draw(st.sampled_from(sorted(one)))
    if change == "drop":
        del one[key]
    elif change == "garbage":
        one[key] = draw(timestamps)
    elif change == "labels":
        one["labels"][draw(st.sampled_from(["alertname", "cluster", "x"]))] = draw(garbage)


@st.composite
def webhooks(draw: Any) -> Any:
    """A notification of a few alerts, sometimes with a top-level defect."""
    doc = webhook(*draw(st.lists(status_alerts, max_size=6)))
    for one in doc["alerts"]:
        mutate(draw, one)
    change = draw(st.sampled_from(["none", "none", "none", "drop", "garbage"]))
    key = draw(st.sampled_from(sorted(doc)))
    if change == "drop":
        del doc[key]
    elif change == "garbage":
        doc[key] = draw(garbage | st.just("3"))
    return doc


alert_bodies = st.one_of(
    webhooks().map(lambda d: json.dumps(d).encode()),
    webhooks().map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=200),
    st.integers(min_value=4000, max_value=6000).map(
        lambda n: b'{"version": "4", "alerts": [], "truncatedAlerts": ' + b"9" * n + b"}"
    ),
)
auths = st.sampled_from([f"Bearer {TOKEN}"] * 8 + [None, "Bearer nope", TOKEN])


@FUZZ
@given(body=alert_bodies, auth=auths)
def test_fuzz_alerts(live: Reactor, body: bytes, auth: str | None) -> None:
    check(live, "POST", "/alerts", body, auth)


names = st.one_of(
    st.sampled_from([*CLUSTERS, *APPS, "nope", "a b", "x" * 300, "ü", "a/b"]),
    st.text(min_size=1, max_size=12),
)
endpoints = st.sampled_from(
    [
        "https://h:6443",
        "https://[::1",
        "https://[::1]:6443",
        "https://h:port",
        "http://:1",
        "https://h:99999",
    ]
)
fields = st.one_of(names, garbage, st.sampled_from(["DEGRADED", "DEPLOYED", "PENDING"]))
known = st.sampled_from([*CLUSTERS, *APPS]) | names
shaped = st.one_of(
    st.fixed_dictionaries({"app": known, "cluster": known}),
    st.fixed_dictionaries({"name": names, "cluster": known}),
    st.fixed_dictionaries(
        {"name": names, "endpoint": endpoints | names},
        optional={"kubeconfig_secret_ref": names},
    ),
    st.fixed_dictionaries({"cluster": known}),
    st.fixed_dictionaries(
        {"status": st.sampled_from(["DEGRADED", "DEPLOYED", "PENDING"]) | garbage},
        optional={"reason": st.none() | names | garbage},
    ),
)
api_bodies = st.one_of(
    shaped.map(lambda d: json.dumps(d).encode()),
    shaped.map(lambda d: json.dumps(d).encode()),
    st.dictionaries(
        st.sampled_from(
            ["name", "cluster", "app", "endpoint", "kubeconfig_secret_ref", "status", "reason", "x"]
        ),
        st.one_of(fields, st.just("https://h:6443")),
        max_size=4,
    ).map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=100),
    st.none(),
)


@st.composite
def api_calls(draw: Any) -> tuple[str, str, bytes | None]:
    method, template = draw(
        st.sampled_from(
            [
                ("GET", "/clusters"),
                ("POST", "/clusters"),
                ("POST", "/clusters"),
                ("GET", "/clusters/{}"),
                ("GET", "/clusters/{}/alerts"),
                ("GET", "/apps"),
                ("POST", "/apps"),
                ("POST", "/apps"),
                ("GET", "/apps/{}"),
                ("PATCH", "/apps/{}"),
                ("PATCH", "/apps/{}"),
                ("PATCH", "/apps/{}"),
                ("POST", "/deployments"),
                ("POST", "/deployments"),
                ("POST", "/deployments"),
                ("GET", "/{}"),
                ("PUT", "/apps/{}"),
                ("DELETE", "/clusters/{}"),
                ("DELETE", "/clusters/{}/alerts"),
                ("DELETE", "/clusters/{}?force=maybe"),
            ]
        )
    )
    path = template.format(quote(draw(names), safe=""))
    body = draw(api_bodies) if method in ("POST", "PATCH", "PUT") else None
    return method, path, body


@FUZZ
@given(call=api_calls(), auth=auths)
def test_fuzz_api(live: Reactor, call: tuple[str, str, bytes | None], auth: str | None) -> None:
    method, path, body = call
    check(live, method, path, body, auth)


# -- headers and content codings -----------------------------------------------------------

#: Bytes a header value may hold on the wire (no CR, LF or other control but tab).
header_bytes = st.binary(max_size=40).map(
    lambda raw: bytes(b for b in raw if b == 9 or 0x20 <= b != 0x7F)
)
authorizations = st.one_of(
    st.none(),
    st.just(f"Bearer {TOKEN}".encode()),
    st.just(f"Bearer {TOKEN}".encode()),
    header_bytes,
    header_bytes.map(lambda raw: b"Bearer " + raw),
    st.just("Bearer fuzz-t\u00f6ken".encode()),
)
codings = st.sampled_from(
    ["gzip", "gzip", "x-gzip", "deflate", "deflate", "br", "zstd", "identity", "GZIP", "gzip, gzip"]
) | header_bytes.map(lambda raw: raw.decode("latin-1"))
content_types = st.none() | st.sampled_from([b"application/json", b"text/plain"]) | header_bytes


@st.composite
def encoded_bodies(draw: Any) -> tuple[str | None, bytes]:
    """(Content-Encoding or None, body): encoded as declared, or not, or cut short."""
    body = draw(alert_bodies)
    coding = draw(st.none() | codings)
    how = draw(st.sampled_from(["as declared", "as declared", "plain", "cut short", "bomb"]))
    if how == "bomb":
        body = b"[" * (1024 * 1024)
    if how != "plain" and coding is not None:
        name = coding.strip().lower()
        if name in ("gzip", "x-gzip"):
            body = gzip.compress(body)
        elif name == "deflate":
            body = zlib.compress(body)
    if how == "cut short":
        body = body[: len(body) // 2]
    return coding, body


@FUZZ
@given(
    path=st.sampled_from(["/alerts", "/alerts", "/alerts", "/apps", "/deployments", "/clusters"]),
    encoded=encoded_bodies(),
    auth=authorizations,
    content_type=content_types,
    extra=st.tuples(st.sampled_from(["User-Agent", "Accept", "X-Forwarded-For"]), header_bytes),
)
def test_fuzz_headers_and_encodings(
    live: Reactor,
    path: str,
    encoded: tuple[str | None, bytes],
    auth: bytes | None,
    content_type: bytes | None,
    extra: tuple[str, bytes],
) -> None:
    coding, body = encoded
    headers = [extra]
    if coding is not None:
        headers.append(("Content-Encoding", coding.encode("latin-1")))
    if auth is not None:
        headers.append(("Authorization", auth))
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    before = dump_db(live.db_path)
    status, answer = live.raw("POST", path, body, headers)
    assert status < 500, (status, answer[:300])
    if status >= 400:
        assert "error" in json.loads(answer), answer[:300]
        assert dump_db(live.db_path) == before, (path, status)
