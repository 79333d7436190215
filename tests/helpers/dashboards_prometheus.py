"""A real Prometheus for the dashboard tests, and the three calls Grafana makes to it.

Grafana's Prometheus datasource sends panel queries to ``/api/v1/query`` (instant) or
``/api/v1/query_range`` and variable queries ``label_values(metric, label)`` to
``/api/v1/label/<label>/values?match[]=metric``; so does this client, and an answer with
``"status": "error"`` (a bad expression, a type error) is raised as ``QueryError``.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from fleetwatch.procs import ManagedProcess, free_port
from tests.helpers.quiet_http import QuietHandler

TIMEOUT = 5.0


class QueryError(AssertionError):
    """Prometheus refused a query: the dashboard would show an error in that panel."""


class Prometheus:
    """Prometheus 2.42 from Debian on 127.0.0.1, a free port and a temporary folder."""

    def __init__(self, root: Path, config: dict[str, Any]) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not installed: run scripts/install.sh")
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config_path = root / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.process = ManagedProcess(
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--web.external-url={self.url}",
            ],
            root / "prometheus.log",
            ready_url=f"{self.url}/-/ready",
        )

    def start(self) -> Prometheus:
        self.process.start(ready_timeout=20)
        return self

    def stop(self) -> None:
        self.process.stop()

    def _get(self, path: str, params: list[tuple[str, str]]) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # 400/422 carry the error as JSON
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise QueryError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def instant(self, expr: str) -> list[dict[str, Any]]:
        """Result of an instant query at the current time (a list of series)."""
        data = self._get("/api/v1/query", [("query", expr), ("time", f"{time.time():.3f}")])
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def range(self, expr: str, seconds: float = 30.0, step: str = "1s") -> list[dict[str, Any]]:
        end = time.time()
        data = self._get(
            "/api/v1/query_range",
            [
                ("query", expr),
                ("start", f"{end - seconds:.3f}"),
                ("end", f"{end:.3f}"),
                ("step", step),
            ],
        )
        result: list[dict[str, Any]] = data["result"]
        return result

    def label_values(self, label: str, match: str) -> list[str]:
        values: list[str] = self._get(f"/api/v1/label/{label}/values", [("match[]", match)])
        return values

    def rule_health(self) -> list[str]:
        """Rules Prometheus could not evaluate, as 'name: error'."""
        groups = self._get("/api/v1/rules", [])["groups"]
        return [
            f"{rule['name']}: {rule.get('lastError')}"
            for group in groups
            for rule in group["rules"]
            if rule.get("health") == "err"
        ]

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MetricsText(QuietHandler):
    """Answers every GET with the exposition text last given to ``Scratch.serve``."""

    server: MetricsServer

    def do_GET(self) -> None:
        self.send_body(200, self.server.body.encode(), "text/plain; version=0.0.4")


class MetricsServer(ThreadingHTTPServer):
    body = ""


@dataclass
class Scratch:
    """A Prometheus (1 s scrape) with no fleetwatch in it, scraping one target (job
    ``scratch``) whose /metrics text the test chooses; empty until ``serve()``."""

    prometheus: Prometheus
    server: MetricsServer

    def serve(self, text: str) -> None:
        self.server.body = text
