"""`fleetwatch demo` as a newcomer runs it: start, take a cluster down, bring it back, Ctrl-C.

The demo's management cluster holds the clusters' Secrets and a few Flux and Argo CD
objects: `demo down` prints those of the cluster paused by fleetwatch (read back, and
read again here with kubectl), `demo up` resumed, and the one paused by hand stays paused.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from fleetwatch.cli.wiring import JsonClient
from fleetwatch.procs import wait_until
from tests.helpers.commands import FLEETWATCH, fleetwatch
from tests.helpers.e2e_demo import alive, cd_objects, running_demo

pytestmark = pytest.mark.live


#: demo-001's Flux and Argo CD objects as `demo down`/`up` and kubectl name them.
ON_001 = (
    "Kustomization demo-001/apps",
    "Kustomization demo-001/monitoring",
    "Application argocd/shop",
)
HELD = ON_001[1]


def _object_lines(stdout: str) -> dict[str, str]:
    """``KIND NAMESPACE/NAME`` -> what `demo down`/`up` says of it."""
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        parts = line.split(maxsplit=2)
        if line.startswith("  ") and len(parts) == 3 and "/" in parts[1]:
            found[f"{parts[0]} {parts[1]}"] = parts[2]
    return found


def test_demo_down_up_and_ctrl_c(tmp_path: Path) -> None:
    state_file = tmp_path / "demo.json"
    out = tmp_path / "demo.out"
    argv = [*FLEETWATCH, "demo", "--web.free-ports", f"--state.file={state_file}"]
    with running_demo(argv, out, state_file, within=90) as demo:
        text = out.read_text()
        assert demo.poll() is None, text
        state = json.loads(state_file.read_text())
        for url in ("/metrics", "/alerts", state["reactor_url"]):
            assert url in text
        # The hint is copied as printed: it must name this demo's state file.
        assert f"fleetwatch demo down demo-001 --state.file {state_file}" in text
        kubeconfig = Path(state["management_kubeconfig"])
        assert f"kubectl --kubeconfig {kubeconfig} get" in text
        reactor = JsonClient(state["reactor_url"])
        apps_on_001 = {a["name"] for a in reactor.get("/apps") if a["cluster"] == "demo-001"}
        # The API's apps and the mirrored Flux and Argo CD objects of demo-001.
        assert {a for a in apps_on_001 if ":" not in a} == {"shop-frontend", "shop-api"}
        assert {a for a in apps_on_001 if ":" in a} == {
            "flux:Kustomization/demo-001/apps",
            "flux:Kustomization/demo-001/monitoring",
            "argocd:Application/argocd/shop",
        }
        objects = cd_objects(kubeconfig, tmp_path)
        assert objects[HELD] == (True, None)  # paused by hand before the demo
        assert {s for label, s in objects.items() if label != HELD} == {(False, None)}

        result = fleetwatch("demo", "down", "demo-001", f"--state.file={state_file}")
        assert result.returncode == 0, result.stderr + out.read_text()
        # It waits for the reactor, then prints demo-001's objects as read back.
        printed = _object_lines(result.stdout)
        assert set(printed) == set(ON_001), result.stdout
        assert "paused by fleetwatch (suspend: true, paused-by-outage: " in printed[ON_001[0]]
        assert "paused by hand (suspend: true, no mark" in printed[HELD]
        assert "paused by fleetwatch (skip-reconcile: true" in printed[ON_001[2]]
        paused = cd_objects(kubeconfig, tmp_path)
        mark = paused[ON_001[0]][1]
        assert mark is not None and mark.isdigit(), paused  # the outage's id
        assert paused[ON_001[0]] == paused[ON_001[2]] == (True, mark), paused
        assert paused[HELD] == (True, None)  # never marked: not fleetwatch's to resume
        others = {label: s for label, s in paused.items() if label not in ON_001}
        assert others and set(others.values()) == {(False, None)}, paused

        def statuses() -> dict[str, str]:
            return {a["name"]: a["status"] for a in reactor.get("/apps")}

        wait_until(
            lambda: all(statuses()[a] == "DEGRADED" for a in apps_on_001),
            30,
            what="demo-001's apps DEGRADED",
        )
        degraded = {a for a, s in statuses().items() if s == "DEGRADED"}
        assert degraded == apps_on_001, out.read_text()

        result = fleetwatch("demo", "up", "demo-001", f"--state.file={state_file}")
        assert result.returncode == 0, result.stderr + out.read_text()
        printed = _object_lines(result.stdout)
        assert printed[ON_001[0]] == "running (suspend: false, no mark)", result.stdout
        assert printed[ON_001[2]] == "running (no skip-reconcile, no mark)", result.stdout
        assert printed[HELD].startswith("paused by hand"), result.stdout
        # Exactly as before the outage: the hand-paused one still paused, the rest running.
        assert cd_objects(kubeconfig, tmp_path) == objects
        wait_until(lambda: set(statuses().values()) == {"DEPLOYED"}, 30, what="every app DEPLOYED")
        # The demo's own account of it, in its terminal.
        log = out.read_text()
        assert "Kustomization demo-001/apps      paused by outage " in log
        assert "Application argocd/shop          running" in log
        bad = fleetwatch("demo", "down", "nope", f"--state.file={state_file}")
        assert bad.returncode == 1
        assert "no cluster named 'nope'" in bad.stderr

        demo.send_signal(signal.SIGINT)
        assert demo.wait(30) == 0, out.read_text()
        children = state["children"]
        assert set(children) == {
            "standin",
            "management",
            "reactor",
            "exporter",
            "prometheus",
            "alertmanager",
        }
        wait_until(
            lambda: not any(alive(pid) for pid in children.values()), 10, what="children gone"
        )
        assert not Path(state["folder"]).exists()
        assert not state_file.exists()
        gone = fleetwatch("demo", "up", "demo-001", f"--state.file={state_file}")
        assert gone.returncode == 1
        assert "no demo is running" in gone.stderr
