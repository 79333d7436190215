"""Stopping a `fleetwatch demo` started by a test, whatever the test's outcome."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path


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
