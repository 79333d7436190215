"""The whole fleetwatch loop for one end-to-end test, every part real and local.

Stand-in clusters -> ``fleetwatch exporter`` (probe every second) -> Prometheus (scrape
and evaluate every second, the rules of ``fleetwatch rules`` for the test's N) ->
Alertmanager (the shipped route, 1 s group interval) -> a small proxy that can answer
500 on demand -> ``fleetwatch reactor`` (SQLite in the test's folder, bearer token).
Processes are started through their CLI on free loopback ports and stopped by pid.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from alerts.rules import RuleSettings
from fleetwatch.cli import wiring
from fleetwatch.cli.wiring import HttpStatusError, JsonClient
from fleetwatch.procs import ManagedProcess, wait_until
from fleetwatch.standin import ThreadedFleet
from tests.helpers.quiet_http import QuietHandler

INTERVAL = 1.0


def _alerts_of(bodies: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (a["labels"].get("alertname", ""), a["labels"].get("cluster", ""), a["status"])
        for body in bodies
        for a in body["alerts"]
    ]


class FlakyProxy:
    """Forwards Alertmanager's webhooks to the reactor, or answers 500 while ``failing``.

    Stands for a reactor that errors for a while (a database hiccup, a bad deploy) without
    touching the reactor's code. Records what it refused, so a test can wait until
    Alertmanager has really tried.
    """

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        #: Answer 500 to everything while True.
        self.failing = False
        #: Answer 500 to the webhooks naming this alert (an integration that breaks on
        #: some payloads only).
        self.failing_alertname: str | None = None
        self.refused: list[dict[str, Any]] = []
        self.forwarded: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                payload = json.loads(body)
                names = {a["labels"].get("alertname") for a in payload.get("alerts", [])}
                if proxy.failing or proxy.failing_alertname in names:
                    with proxy._lock:
                        proxy.refused.append(payload)
                    self.send_body(500, b'{"error": "test proxy: failing on purpose"}')
                    return
                request = urllib.request.Request(
                    proxy.target + self.path,
                    data=body,
                    method="POST",
                    headers={
                        "Content-Type": "application/json",
                        "Authorization": self.headers.get("Authorization", ""),
                    },
                )
                try:
                    with urllib.request.urlopen(request, timeout=5) as resp:
                        status, answer = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    status, answer = exc.code, exc.read()
                except OSError:
                    status, answer = 502, b'{"error": "test proxy: reactor unreachable"}'
                if 200 <= status < 300:
                    with proxy._lock:
                        proxy.forwarded.append(payload)
                self.send_body(status, answer)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def refused_alerts(self) -> list[tuple[str, str, str]]:
        """(alertname, cluster, status) of every alert in a refused webhook."""
        with self._lock:
            return _alerts_of(self.refused)

    def delivery_log(self) -> list[tuple[str, str, str, str, str]]:
        """Every alert the reactor accepted: (alertname, cluster, status, startsAt, endsAt)."""
        with self._lock:
            return [
                (
                    a["labels"].get("alertname", ""),
                    a["labels"].get("cluster", ""),
                    a["status"],
                    a["startsAt"],
                    a["endsAt"],
                )
                for body in self.forwarded
                for a in body["alerts"]
            ]

    def forwarded_alerts(self) -> list[tuple[str, str, str]]:
        """(alertname, cluster, status) of every alert the reactor accepted."""
        with self._lock:
            return _alerts_of(self.forwarded)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


class Loop:
    """One test's fleetwatch: start with ``start(clusters)``, always ``stop()``."""

    def __init__(
        self,
        root: Path,
        fleet: ThreadedFleet,
        threshold: int = 2,
        repeat_interval: str = "1m",
        count_rejected: bool = True,
    ) -> None:
        self.root = root
        self.fleet = fleet
        self.threshold = threshold
        #: ``fleetwatch rules --[no-]failure.count-rejected``
        self.count_rejected = count_rejected
        self.repeat_interval = repeat_interval
        self.token = secrets.token_urlsafe(24)
        self.token_file = root / "token"
        self.db_path = root / "reactor" / "fleetwatch.db"
        self.kubeconfig = root / "kubeconfig.yaml"
        #: What the exporter and the reactor are started with (a subclass may change it).
        self.process_kubeconfig = self.kubeconfig
        self.exporter_extra: list[str] = []
        self.reactor_extra: list[str] = []
        #: Ports are picked when each part starts (and kept across its restarts).
        self.exporter_port: int | None = None
        self.reactor_port: int | None = None
        self.prometheus: ManagedProcess | None = None
        self.alertmanager: ManagedProcess | None = None
        self.exporter: ManagedProcess | None = None
        self.reactor_proc: ManagedProcess | None = None
        self.proxy: FlakyProxy | None = None
        self.reactor = JsonClient("http://127.0.0.1:0", self.token)

    # -- life cycle ---------------------------------------------------------------------

    def start(self, clusters: list[str]) -> Loop:
        try:
            self._start(clusters)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, clusters: list[str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)
        for name in clusters:
            self.fleet.add_cluster(name)
        self.fleet.write_kubeconfig(self.kubeconfig, clusters)
        rules = wiring.render_rules_file(
            self.root / "rules.yml",
            RuleSettings(
                failure_threshold=self.threshold,
                probe_interval=INTERVAL,
                count_rejected=self.count_rejected,
            ),
        )
        self.start_reactor()
        self.proxy = FlakyProxy(self.reactor.base)
        self.start_exporter()
        self.alertmanager, am_port = wiring.start_alertmanager(
            self.root / "alertmanager",
            wiring.alertmanager_config(
                reactor_url=self.proxy.url,
                token_file=self.token_file,
                group_interval="1s",
                repeat_interval=self.repeat_interval,
            ),
        )
        self.am_url = f"http://127.0.0.1:{am_port}"
        self.prometheus, prom_port = wiring.start_prometheus(
            self.root / "prometheus",
            wiring.prometheus_config(
                exporter=f"127.0.0.1:{self.exporter_port}",
                alertmanager=f"127.0.0.1:{am_port}",
                rule_file=rules,
                interval=INTERVAL,
            ),
        )
        self.prom_url = f"http://127.0.0.1:{prom_port}"

    def start_reactor(self) -> None:
        self.reactor_proc, self.reactor_port = wiring.start_reactor(
            self.root / "reactor",
            port=self.reactor_port,
            db_path=self.db_path,
            token_file=self.token_file,
            kubeconfig=self.process_kubeconfig,
            extra=self.reactor_extra,
        )
        self.reactor.base = f"http://127.0.0.1:{self.reactor_port}"

    def stop_reactor(self) -> None:
        if self.reactor_proc is not None:
            self.reactor_proc.stop()

    def start_exporter(self) -> None:
        self.exporter, self.exporter_port = wiring.start_exporter(
            self.root / "exporter",
            port=self.exporter_port,
            kubeconfig=self.process_kubeconfig,
            interval=INTERVAL,
            extra=self.exporter_extra,
        )

    def stop_exporter(self) -> None:
        if self.exporter is not None:
            self.exporter.stop()

    def stop(self) -> None:
        for proc in (self.exporter, self.prometheus, self.alertmanager, self.reactor_proc):
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.stop()
        if self.proxy is not None:
            self.proxy.close()

    def logs(self) -> str:
        procs = (self.exporter, self.prometheus, self.alertmanager, self.reactor_proc)
        return "\n".join(f"--- {p.log_path} ---\n{p.log_tail(25)}" for p in procs if p is not None)

    # -- observing ----------------------------------------------------------------------

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
        """wait_until, with every log tail in the failure message."""
        try:
            return wait_until(predicate, timeout, interval=0.05, what=what)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}\n{self.logs()}") from None

    def wait_delivered(self, alertname: str, cluster: str, status: str) -> None:
        """Until the proxy has passed the reactor a notification of that alert's status."""
        proxy = self.proxy
        assert proxy is not None
        self.wait(
            lambda: (alertname, cluster, status) in proxy.forwarded_alerts(),
            f"{cluster} {alertname} {status} delivered",
        )

    def describe(self) -> str:
        """Everyone's view, for a failure message: reactor, Prometheus, Alertmanager, proxy."""
        parts: list[str] = []
        views: list[tuple[str, Callable[[], Any]]] = [
            ("reactor clusters", lambda: self.reactor.get("/clusters")),
            ("reactor apps", lambda: self.apps()),
            ("prometheus ALERTS", lambda: [s["metric"] for s in self.query("ALERTS")]),
            (
                "alertmanager",
                lambda: [
                    (a["labels"], a["status"], a["startsAt"], a["endsAt"])
                    for a in self.am_alerts_all()
                ],
            ),
            ("proxy refused", lambda: self.proxy.refused_alerts() if self.proxy else None),
            ("proxy delivered", lambda: self.proxy.delivery_log() if self.proxy else None),
        ]
        for name, view in views:
            try:
                parts.append(f"{name}: {json.dumps(view(), default=str)}")
            except Exception as exc:
                parts.append(f"{name}: unavailable ({exc!r})")
        return "\n".join(parts)

    def app(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.reactor.get(f"/apps/{name}")
        return result

    def apps(self) -> dict[str, tuple[str, str | None]]:
        return {a["name"]: (a["status"], a["reason"]) for a in self.reactor.get("/apps")}

    def cluster_status(self, name: str) -> str:
        status: str = self.reactor.get(f"/clusters/{name}")["status"]
        return status

    def wait_cluster(self, name: str, status: str, timeout: float = 30.0) -> None:
        self.wait(lambda: self.cluster_status(name) == status, f"{name} {status}", timeout)

    def wait_app(self, name: str, status: str, timeout: float = 30.0) -> float:
        """Wait until the app has this status; the monotonic time it was first seen."""
        self.wait(lambda: self.app(name)["status"] == status, f"app {name} {status}", timeout)
        return time.monotonic()

    def deploy(self, app: str, cluster: str) -> dict[str, Any]:
        with contextlib.suppress(HttpStatusError):
            self.reactor.post("/apps", {"name": app, "cluster": cluster})
        result: dict[str, Any] = self.reactor.post("/deployments", {"app": app, "cluster": cluster})
        return result

    def deploy_status(self, app: str, cluster: str) -> int:
        """HTTP status of ``POST /deployments`` (201 or the error's status)."""
        try:
            self.reactor.post("/deployments", {"app": app, "cluster": cluster})
        except HttpStatusError as exc:
            return exc.status
        return 201

    def query(self, expr: str) -> list[dict[str, Any]]:
        return wiring.prometheus_query(self.prom_url, expr)

    def firing(self, alertname: str) -> set[str]:
        """Clusters for which Prometheus has ``alertname`` firing."""
        result = self.query(f'ALERTS{{alertname="{alertname}", alertstate="firing"}}')
        return {s["metric"].get("cluster", "") for s in result}

    def am_post(self, path: str, body: Any) -> Any:
        return JsonClient(self.am_url).post(path, body)

    def am_alerts_all(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.am_url}/api/v2/alerts", timeout=5) as resp:
            alerts: list[dict[str, Any]] = json.load(resp)
        return alerts

    def am_alerts(self, alertname: str) -> list[dict[str, Any]]:
        url = f'{self.am_url}/api/v2/alerts?filter=alertname="{alertname}"'
        with urllib.request.urlopen(url.replace('"', "%22"), timeout=5) as resp:
            alerts: list[dict[str, Any]] = json.load(resp)
        return alerts

    def set_mode(self, name: str, mode: str) -> float:
        """Switch a stand-in cluster; the monotonic time the switch was done."""
        self.fleet.set_mode(name, mode)
        return time.monotonic()
