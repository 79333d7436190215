"""`fleetwatch demo` as a newcomer runs it: start, take a cluster down, bring it back, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_demo import alive, stop_demo

from fleetwatch.procs import wait_until
from fleetwatch.wiring import JsonClient

pytestmark = pytest.mark.live


def _fleetwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetwatch.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_demo_down_up_and_ctrl_c(tmp_path: Path) -> None:
    state_file = tmp_path / "demo.json"
    out = tmp_path / "demo.out"
    with out.open("w") as sink:
        demo = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fleetwatch.cli",
                "demo",
                "--web.free-ports",
                f"--state.file={state_file}",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: "\nready\n" in out.read_text() or demo.poll() is not None,
            90,
            interval=0.1,
            what="the demo's banner",
        )
        text = out.read_text()
        assert demo.poll() is None, text
        state = json.loads(state_file.read_text())
        for url in ("/metrics", "/alerts", state["reactor_url"]):
            assert url in text
        # The hint is copied as printed: it must name this demo's state file.
        assert f"fleetwatch demo down demo-001 --state.file {state_file}" in text
        reactor = JsonClient(state["reactor_url"])
        apps_on_001 = {a["name"] for a in reactor.get("/apps") if a["cluster"] == "demo-001"}
        assert apps_on_001

        result = _fleetwatch("demo", "down", "demo-001", f"--state.file={state_file}")
        assert result.returncode == 0, result.stderr + out.read_text()

        def statuses() -> dict[str, str]:
            return {a["name"]: a["status"] for a in reactor.get("/apps")}

        wait_until(
            lambda: all(statuses()[a] == "DEGRADED" for a in apps_on_001),
            30,
            what="demo-001's apps DEGRADED",
        )
        degraded = {a for a, s in statuses().items() if s == "DEGRADED"}
        assert degraded == apps_on_001, out.read_text()

        result = _fleetwatch("demo", "up", "demo-001", f"--state.file={state_file}")
        assert result.returncode == 0, result.stderr + out.read_text()
        wait_until(lambda: set(statuses().values()) == {"DEPLOYED"}, 30, what="every app DEPLOYED")
        bad = _fleetwatch("demo", "down", "nope", f"--state.file={state_file}")
        assert bad.returncode == 1
        assert "no cluster named 'nope'" in bad.stderr

        demo.send_signal(signal.SIGINT)
        assert demo.wait(30) == 0, out.read_text()
        children = state["children"]
        assert set(children) == {"standin", "reactor", "exporter", "prometheus", "alertmanager"}
        wait_until(
            lambda: not any(alive(pid) for pid in children.values()), 10, what="children gone"
        )
        assert not Path(state["folder"]).exists()
        assert not state_file.exists()
        gone = _fleetwatch("demo", "up", "demo-001", f"--state.file={state_file}")
        assert gone.returncode == 1
        assert "no demo is running" in gone.stderr
    finally:
        stop_demo(demo, state_file)
