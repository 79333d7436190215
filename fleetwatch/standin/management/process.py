"""The management cluster in a child process, driven through its control API.

For the demo and for tests that want the server out of their own process (a real
client's view of a separate API server, stopped by pid): runs ``python -m
fleetwatch.standin management``, reads the summary line it prints, and offers the
control calls over HTTP. Blocking (urllib): call it from threads, not from an event loop.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from fleetwatch.procs import ManagedProcess, wait_until

#: The keys of the line the command prints once it serves.
SUMMARY_KEYS = frozenset({"url", "control_url", "kubeconfig", "token", "ca_file"})


class ManagementProcess:
    """``python -m fleetwatch.standin management`` as a child; ``.url``, ``.token`` etc.
    once started."""

    def __init__(
        self,
        directory: Path,
        *,
        bookmark_seconds: float = 60.0,
        seed: Path | None = None,
        python: str = sys.executable,
    ) -> None:
        self.directory = directory
        argv = [python, "-m", "fleetwatch.standin", "management", "--dir", str(directory)]
        argv += ["--bookmark-seconds", str(bookmark_seconds)]
        if seed is not None:
            argv += ["--seed", str(seed)]
        self.process = ManagedProcess(argv, directory / "management.log")
        self.summary: dict[str, str] = {}
        #: Where this run's output starts in the log (it is appended to, run after run).
        self._log_start = 0

    def start(self, timeout: float = 30.0) -> ManagementProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = self.process.log_path
        self._log_start = log.stat().st_size if log.exists() else 0
        self.process.start()
        try:
            self.summary = wait_until(self._summary, timeout, what="the management summary line")
        except BaseException:
            self.process.stop()
            raise
        return self

    def _summary(self) -> dict[str, str] | None:
        if not self.process.alive():
            raise RuntimeError(f"the management cluster exited:\n{self.process.log_tail()}")
        with self.process.log_path.open("rb") as log:
            log.seek(self._log_start)
            text = log.read().decode(errors="replace")
        for line in text.splitlines():
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict) and set(found) >= SUMMARY_KEYS:
                return found
        return None

    def stop(self) -> int | None:
        """SIGTERM (then SIGKILL) by pid; the exit code (0 for a clean stop)."""
        return self.process.stop()

    def __enter__(self) -> ManagementProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        return self.summary["url"]

    @property
    def control_url(self) -> str:
        return self.summary["control_url"]

    @property
    def token(self) -> str:
        return self.summary["token"]

    @property
    def kubeconfig(self) -> Path:
        return Path(self.summary["kubeconfig"])

    @property
    def ca_file(self) -> Path:
        return Path(self.summary["ca_file"])

    # --- the control API -------------------------------------------------------------

    def control(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.control_url + path, data=data, method=method)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def seed(
        self, objects: Iterable[dict[str, Any]], timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """Create or update objects in one call (thousands at once: a rotation of them all)."""
        found: list[dict[str, Any]] = self.control(
            "POST", "/objects", list(objects), timeout=timeout
        )["objects"]
        return found

    def arm_fault(self, **fault: Any) -> None:
        self.control("POST", "/faults", fault)

    def clear_faults(self) -> None:
        self.control("DELETE", "/faults")

    def compact(self) -> int:
        return int(self.control("POST", "/compact")["compacted"])

    def close_watches(self) -> int:
        return int(self.control("POST", "/watches/close")["closed"])

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = self.control("GET", "/requests")["counts"]
        return found

    def audit(self) -> list[dict[str, Any]]:
        """Every write answered, oldest first (``audit.AuditEvent``'s fields)."""
        found: list[dict[str, Any]] = self.control("GET", "/audit", timeout=30.0)["events"]
        return found

    def open_watches(self) -> int:
        return int(self.control("GET", "/")["watches"])

    def issue_token(self, user: str, **restrictions: list[str]) -> str:
        return str(self.control("POST", "/tokens", {"user": user, **restrictions})["token"])
