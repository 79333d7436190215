"""Running a `fleetwatch demo` for a test and stopping it whatever the test's outcome; reading
its management cluster's Flux and Argo CD objects with kubectl, as the banner says."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fleetwatch.procs import wait_until

#: The kinds the demo's banner tells people to list.
CD_RESOURCES = "kustomizations,helmreleases,applications"
SKIP_RECONCILE = "argocd.argoproj.io/skip-reconcile"
MARK = "fleetwatch.io/paused-by-outage"


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie counts as gone: /proc tells them apart)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def stop_demo(demo: subprocess.Popen[bytes], state_file: Path) -> None:
    """A failed assertion must not leave the demo's servers behind: Ctrl-C first (the demo
    stops its children), then by pid whatever is still alive."""
    if demo.poll() is None:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(20)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait(10)
    if state_file.exists():
        for pid in json.loads(state_file.read_text()).get("children", {}).values():
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@contextmanager
def running_demo(
    argv: list[str],
    out: Path,
    state_file: Path,
    *,
    within: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` (a `fleetwatch demo` writing ``state_file``) in a session of its own, its output
    in ``out``, once it printed its banner or ended (within ``within`` seconds); stopped on
    exit by :func:`stop_demo`."""
    with out.open("w") as sink:
        demo = subprocess.Popen(
            argv,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: "\nready\n" in out.read_text() or demo.poll() is not None,
            within,
            interval=0.1,
            what="the demo's banner",
        )
        yield demo
    finally:
        stop_demo(demo, state_file)


def cd_objects(kubeconfig: Path, workdir: Path) -> dict[str, tuple[bool, str | None]]:
    """``KIND NAMESPACE/NAME`` -> (paused, fleetwatch's mark), read with kubectl (its own
    home and cache: a port reused later must not find this server's discovery there)."""
    env = {**os.environ, "HOME": str(workdir), "KUBECONFIG": str(kubeconfig)}
    cache = str(workdir / "kube-cache")
    done = subprocess.run(
        ["kubectl", "--cache-dir", cache, "get", CD_RESOURCES, "-A", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    found: dict[str, tuple[bool, str | None]] = {}
    for item in json.loads(done.stdout)["items"]:
        meta: dict[str, Any] = item["metadata"]
        notes = meta.get("annotations") or {}
        if item["kind"] == "Application":
            paused = notes.get(SKIP_RECONCILE) == "true"
        else:
            paused = item["spec"].get("suspend") is True
        found[f"{item['kind']} {meta['namespace']}/{meta['name']}"] = (paused, notes.get(MARK))
    return found
