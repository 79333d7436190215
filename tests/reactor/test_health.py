"""``/-/healthy`` and ``/-/ready``: unauthenticated, and ready only while the database answers."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from fleetwatch.procs import ManagedProcess, free_port, http_ok, wait_until
from reactor.app import create_app
from reactor.context import ReactorSettings
from reactor.store import StoreUnavailable
from reactor.store.sqlite import SQLiteStore
from tests.helpers.reactor_helpers import TOKEN, MakeClient


async def test_healthy_and_ready_need_no_token(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    for path in ("/-/healthy", "/-/ready"):
        resp = await client.get(path)
        assert resp.status == 200, await resp.text()
    assert (await client.post("/clusters", json={})).status == 401  # the token still guards


class FlakyStore(SQLiteStore):
    """A real SQLite store whose database can be made to look unreachable."""

    unreachable = False

    def ping(self) -> None:
        if self.unreachable:
            raise StoreUnavailable("connection refused")
        super().ping()

    def reader(self) -> SQLiteStore | None:
        return None  # every read through this handle, so ``ping`` is the one above


async def test_ready_is_503_while_the_database_is_unreachable(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    store = FlakyStore(tmp_path / "state.db")
    app = create_app(ReactorSettings(db_path=tmp_path / "state.db"), store_factory=lambda: store)
    client: TestClient[Any, Any] = await aiohttp_client(app)
    assert (await client.get("/-/ready")).status == 200
    store.unreachable = True
    resp = await client.get("/-/ready")
    assert resp.status == 503
    assert resp.headers["Retry-After"] == "1"
    assert "the database is unavailable" in await resp.text()
    assert (await client.get("/-/healthy")).status == 200  # a restart would not help
    store.unreachable = False
    assert (await client.get("/-/ready")).status == 200


@pytest.mark.live
def test_the_process_on_every_interface_logs_json_without_credentials(tmp_path: Path) -> None:
    """``:PORT`` binds every interface: 127.0.0.2 reaches it, which 127.0.0.1 alone would not."""
    port, closed = free_port(), free_port()
    proc = ManagedProcess(
        [
            sys.executable,
            "-m",
            "fleetwatch.cli",
            "reactor",
            f"--web.listen-address=:{port}",
            f"--db.path={tmp_path / 'state.db'}",
            f"--kubeconfig={tmp_path / 'no-kubeconfig'}",
            "--log.format=json",
            f"--alertmanager.url=http://admin:hunter2@127.0.0.1:{closed}",
            "--alertmanager.reconcile-interval=0.2",
        ],
        tmp_path / "reactor.log",
        ready_url=f"http://127.0.0.2:{port}/-/ready",
    )
    proc.start()
    try:
        assert http_ok(f"http://127.0.0.1:{port}/-/healthy")
        wait_until(
            lambda: "cannot read Alertmanager" in proc.log_path.read_text(),
            10,
            what="the reconciliation's warning",
        )
        wait_until(
            lambda: "fleetwatch_reactor_reconcile_failures_total" in _failures(port, 3),
            10,
            what="three failed reconciliations",
        )
    finally:
        assert proc.stop() == 0, proc.log_tail()
    lines = [json.loads(line) for line in proc.log_path.read_text().splitlines()]
    assert {"ts", "level", "logger", "msg"} <= set(lines[0])
    assert any(f"reactor on http://*:{port}" in line["msg"] for line in lines)
    warnings = [line["msg"] for line in lines if "cannot read Alertmanager" in line["msg"]]
    assert len(warnings) == 1, warnings  # said once, however many runs failed
    assert "hunter2" not in proc.log_path.read_text()


def _failures(port: int, at_least: int) -> str:
    """The failures line of /metrics once it counts ``at_least``, else ''."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("fleetwatch_reactor_reconcile_failures_total{"):
                return line if float(line.rsplit(" ", 1)[1]) >= at_least else ""
    return ""
