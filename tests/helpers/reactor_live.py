"""A ``fleetwatch reactor`` process, for tests that call it over HTTP as an outside client
would (schemathesis, a generated client, the process and fuzz tests)."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.procs import ManagedProcess, free_port
from tests.helpers.commands import FLEETWATCH
from tests.helpers.reactor_helpers import db_flag

TOKEN = "contract-test-token"


@contextmanager
def running_reactor(folder: Path, *extra: str) -> Iterator[str]:
    """The base URL of a reactor on a fresh SQLite file in ``folder``; stopped on exit."""
    port = free_port()
    token_file = folder / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    argv = [
        str(Path(sys.executable).parent / "fleetwatch"),
        "reactor",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--db.path={folder / 'state.db'}",
        f"--web.token-file={token_file}",
        "--kubeconfig=",
        "--log.level=warning",
        *extra,
    ]
    base = f"http://127.0.0.1:{port}"
    with ManagedProcess(argv, folder / "reactor.log", ready_url=f"{base}/healthz"):
        yield base


def reactor_process(
    folder: Path, db_path: Path, *extra: str, name: str = "reactor", port: int | None = None
) -> tuple[ManagedProcess, str]:
    """A ``fleetwatch reactor`` on ``db_path`` (a SQLite file, or a PostgreSQL URL's file: see
    ``db_flag``) and no kubeconfig, on a free port, not started; with its base URL."""
    port = free_port() if port is None else port
    argv = [
        *FLEETWATCH,
        "reactor",
        f"--web.listen-address=127.0.0.1:{port}",
        db_flag(db_path),
        f"--kubeconfig={folder / 'no-kubeconfig'}",
        *extra,
    ]
    url = f"http://127.0.0.1:{port}"
    return ManagedProcess(argv, folder / f"{name}.log", ready_url=f"{url}/healthz"), url


def call(
    url: str, method: str = "GET", body: Any = None, token: str | None = None, timeout: float = 30
) -> tuple[int, Any]:
    """One request to a reactor's API: the status and the JSON answer (an error's too)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def metric_sample(base: str, name: str, **labels: str) -> float | None:
    """The first sample called ``name`` with (at least) ``labels`` on ``base``/metrics;
    None where there is none."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return None
