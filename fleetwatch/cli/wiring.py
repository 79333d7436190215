"""fleetwatch wired into a real Prometheus and Alertmanager, on this machine.

The whole loop (exporter -> Prometheus rules -> Alertmanager route -> reactor) as local
processes: used by ``fleetwatch demo`` and the end-to-end tests, so both run exactly the
rules ``fleetwatch rules`` renders and the shipped route (``alerts/alertmanager.yml``). Every
process listens on 127.0.0.1, keeps its files in the folder it is given, and is stopped
by its own pid (``fleetwatch.procs``).

A little over 300 lines: the Prometheus and Alertmanager configurations for the demo and
the end-to-end tests are one recipe, written once.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from alerts.rules import RuleSettings, prom_duration, render_rules
from fleetwatch.cli import shipped
from fleetwatch.procs import ManagedProcess, NotReadyError, free_port

PROMETHEUS_BIN = "prometheus"
ALERTMANAGER_BIN = "prometheus-alertmanager"
#: Variables a child must not inherit from the caller's shell: the loop sets its own.
_RESET_ENV = {
    "KUBECONFIG_PATH": "",
    "KUBECONFIG_DIR": "",
    "CLUSTER_HEALTH_INTERVAL": "",
    "CLUSTER_HEALTH_FAILURE_THRESHOLD": "",
    "FLEETWATCH_TOKEN": "",
}


def fleetwatch_argv(*args: str) -> list[str]:
    """The ``fleetwatch`` command of this interpreter (works from a checkout or a venv)."""
    return [sys.executable, "-m", "fleetwatch.cli", *args]


def have_prometheus() -> bool:
    return shutil.which(PROMETHEUS_BIN) is not None and shutil.which(ALERTMANAGER_BIN) is not None


# --- configuration files ----------------------------------------------------------------


def prometheus_config(
    *,
    exporter: str,
    alertmanager: str,
    rule_file: Path,
    interval: float,
    reactor: str | None = None,
    exporter_job: str = "fleetwatch-exporter",
) -> dict[str, Any]:
    """Scrape the exporter (and the reactor) every ``interval``, evaluate the rules as often."""
    every = prom_duration(interval)

    def job(name: str, target: str) -> dict[str, Any]:
        return {
            "job_name": name,
            "scrape_timeout": prom_duration(min(interval, 10.0)),
            "static_configs": [{"targets": [target]}],
        }

    scrape = [job(exporter_job, exporter)]
    if reactor is not None:
        scrape.append(job("fleetwatch-reactor", reactor))
    return {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "rule_files": [str(rule_file)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": scrape,
    }


def alertmanager_config(
    *,
    reactor_url: str,
    token_file: Path,
    group_interval: str,
    repeat_interval: str,
    base: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The shipped route (``alerts/alertmanager.yml``) pointed at a reactor, with faster timings.

    Only the reactor's URL and token file and the status routes' ``group_interval`` and
    ``repeat_interval`` change; receivers, matchers and inhibit rules stay as shipped.
    """
    config = copy.deepcopy(base if base is not None else load_shipped_alertmanager())
    for receiver in config["receivers"]:
        if receiver["name"] == "fleetwatch-reactor":
            for hook in receiver["webhook_configs"]:
                hook["url"] = reactor_url.rstrip("/") + "/alerts"
                hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    for route in config["route"].get("routes", []):
        if route.get("receiver") == "fleetwatch-reactor":
            route["group_interval"] = group_interval
            route["repeat_interval"] = repeat_interval
    return config


def load_shipped_alertmanager() -> dict[str, Any]:
    """The shipped ``alertmanager.yml`` (package data: a checkout and a wheel alike)."""
    return shipped.alertmanager_config()


def write_yaml(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- processes ----------------------------------------------------------------------------


def start_on_port(
    build: Callable[[int], ManagedProcess], port: int | None, ready_timeout: float = 30.0
) -> tuple[ManagedProcess, int]:
    """Start ``build(port)``; with no port given, on a free one, retried if it gets taken.

    A free port can be taken by someone else between ``free_port()`` and the child's bind
    (other test runs share this machine): then we try another one, twice at most.
    """
    attempts = 1 if port else 3
    for attempt in range(attempts):
        chosen = port or free_port()
        proc = build(chosen)
        try:
            proc.start(ready_timeout=ready_timeout)
        except NotReadyError as exc:
            if attempt + 1 < attempts and "address already in use" in str(exc).lower():
                continue
            raise
        return proc, chosen
    raise AssertionError("unreachable")


def start_prometheus(
    folder: Path, config: dict[str, Any], port: int | None = None
) -> tuple[ManagedProcess, int]:
    config_file = write_yaml(folder / "prometheus.yml", config)

    def build(port: int) -> ManagedProcess:
        url = f"http://127.0.0.1:{port}"
        return ManagedProcess(
            [
                PROMETHEUS_BIN,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url={url}",
                "--log.level=warn",
            ],
            folder / "prometheus.log",
            ready_url=f"{url}/-/ready",
        )

    return start_on_port(build, port)


def start_alertmanager(
    folder: Path, config: dict[str, Any], port: int | None = None
) -> tuple[ManagedProcess, int]:
    config_file = write_yaml(folder / "alertmanager.yml", config)

    def build(port: int) -> ManagedProcess:
        url = f"http://127.0.0.1:{port}"
        return ManagedProcess(
            [
                ALERTMANAGER_BIN,
                f"--config.file={config_file}",
                f"--storage.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url={url}",
                # Empty: no gossip. Otherwise Alertmanager binds 0.0.0.0:9094.
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            folder / "alertmanager.log",
            ready_url=f"{url}/-/ready",
        )

    return start_on_port(build, port)


def start_exporter(
    folder: Path,
    *,
    kubeconfig: Path,
    interval: float,
    port: int | None = None,
    kubeconfig_dir: Path | None = None,
    extra: Sequence[str] = (),
) -> tuple[ManagedProcess, int]:
    flags = [f"--probe.interval={interval:g}"]
    return _start_fleetwatch("exporter", folder, port, flags, kubeconfig, kubeconfig_dir, extra)


def start_reactor(
    folder: Path,
    *,
    db_path: Path,
    token_file: Path,
    kubeconfig: Path,
    port: int | None = None,
    kubeconfig_dir: Path | None = None,
    extra: Sequence[str] = (),
) -> tuple[ManagedProcess, int]:
    flags = [f"--db.path={db_path}", f"--web.token-file={token_file}"]
    return _start_fleetwatch("reactor", folder, port, flags, kubeconfig, kubeconfig_dir, extra)


def _start_fleetwatch(
    command: str,
    folder: Path,
    port: int | None,
    flags: Sequence[str],
    kubeconfig: Path,
    kubeconfig_dir: Path | None,
    extra: Sequence[str],
) -> tuple[ManagedProcess, int]:
    """``fleetwatch COMMAND`` on 127.0.0.1 (``port``, or a free one), logging to
    ``folder/COMMAND.log``, ready when ``/healthz`` answers."""

    def build(port: int) -> ManagedProcess:
        args = [command, f"--web.listen-address=127.0.0.1:{port}", *flags]
        args.append(f"--kubeconfig={kubeconfig}")
        if kubeconfig_dir is not None:
            args.append(f"--kubeconfig.dir={kubeconfig_dir}")
        return ManagedProcess(
            fleetwatch_argv(*args, *extra),
            folder / f"{command}.log",
            ready_url=f"http://127.0.0.1:{port}/healthz",
            env=_RESET_ENV,
        )

    return start_on_port(build, port)


# --- a small JSON client (stdlib: the demo and the tests need nothing more) -------------


class HttpStatusError(RuntimeError):
    """An answer of :class:`JsonClient` with an HTTP error status; ``body`` parsed if JSON."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


@dataclass
class JsonClient:
    """JSON over HTTP to one base URL, with a bearer token and a timeout on every call."""

    base: str
    token: str | None = None
    timeout: float = 5.0
    headers: dict[str, str] = field(default_factory=dict)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", **self.headers}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(
            self.base.rstrip("/") + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            raise HttpStatusError(exc.code, parsed) from None
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.call("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, body)

    def patch(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, body)


def prometheus_query(base: str, expr: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """Instant query; the result vector."""
    url = f"{base.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body = json.load(resp)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def render_rules_file(path: Path, settings: RuleSettings) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_rules(settings))
    return path
