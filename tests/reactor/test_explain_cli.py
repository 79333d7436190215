"""``fleetwatch explain``'s gatherer against small local servers: a source that answers
an error, credentials in a URL (sent as basic auth, never printed), rules not readable.
The whole loop (real Prometheus, Alertmanager, reactor) is tests/e2e/test_explain.py."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from fleetwatch.cli.explain import gather, where
from tests.helpers.quiet_http import QuietHandler

pytestmark = pytest.mark.live


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """Answers a Prometheus query with one vantage point's series, 500 to its rules, and
    404 to the reactor's cluster; records each Authorization header."""
    seen: list[str] = []

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            if self.path.startswith("/api/v1/query"):
                series = {
                    "metric": {
                        "__name__": "fleetwatch_cluster_probe_consecutive_failures",
                        "cluster": "c1",
                        "instance": "127.0.0.1:9",
                    },
                    "value": [0, "2"],
                }
                self.send_json(200, {"status": "success", "data": {"result": [series]}})
            elif self.path.startswith("/api/v1/rules"):
                self.send_json(500, {"error": "rules unavailable"})
            else:
                self.send_json(404, {"error": "cluster 'c1' not found"})

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        thread.join(timeout=5)


def test_a_partial_answer_names_the_source_it_lacks_and_never_a_credential(
    server: tuple[str, list[str]],
) -> None:
    address, seen = server
    g = gather(
        "c1",
        reactor=f"http://{address}",
        prometheus=f"http://admin:hunter2@{address}",
        alertmanager="http://127.0.0.1:1",
        timeout=5,
    )
    assert g.known_by == ["prometheus"]  # the reactor's 404 is not a problem: unknown there
    assert g.probes == [{"instance": "127.0.0.1:9", "consecutive_failures": 2}]
    assert g.rules_note is not None and "rules could not be read" in g.rules_note
    assert len(g.problems) == 1 and g.problems[0].startswith("Alertmanager 127.0.0.1:1")
    assert "Basic YWRtaW46aHVudGVyMg==" in seen  # admin:hunter2, as basic auth
    assert "hunter2" not in json.dumps(g.__dict__)
    assert where("http://admin:hunter2@example.org:9090/prom") == "example.org:9090"
