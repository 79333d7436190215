"""Run local servers (Prometheus, Alertmanager, etcd, fleetwatch itself) and wait for them.

Shared by the tests, the benchmarks and ``fleetwatch demo``: every server listens on
127.0.0.1 on a free port, is polled for readiness with a deadline (never a fixed sleep),
and is stopped by its own process id, so nothing outlives the caller.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class NotReadyError(RuntimeError):
    """A server did not become ready before its deadline (its log tail is in the message)."""


#: Where :func:`free_port` picks when a test run gave this process a slice of its own
#: (:func:`use_port_slice`); None: the kernel picks.
_slice: range | None = None
_next = 0


def use_port_slice(index: int, count: int) -> range | None:
    """Pick free ports in slice ``index`` of ``count`` above the kernel's ephemeral range.

    A port is free only when it is picked: the server that is to listen on it binds a
    moment later (seconds, for a process starting on a loaded machine), and meanwhile
    anyone may take it. With the kernel picking (``bind`` to port 0), the taker is any
    ``bind`` to port 0 (every aiohttp test server) of any process; in a CI run a reactor
    once answered the readiness URL of the Alertmanager whose port it had taken. Above
    the ephemeral range nobody binds by accident (connections and ``bind`` to port 0 stay
    inside it; the stand-in fleets' clusters stay below it,
    ``fleetwatch.standin.workload.ports``), and a slice per test worker, walked in turn,
    keeps the workers of one run out of each other's way. Returns the slice, or None
    (and the kernel keeps picking) where there is no room above the range.
    """
    global _slice, _next
    room = range(_ephemeral_high() + 1, 65536)
    size = len(room) // max(1, count)
    if size < 64:
        _slice = None
        return None
    _slice = room[index * size : (index + 1) * size]
    _next = random.SystemRandom().randrange(len(_slice))
    return _slice


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now (see :func:`use_port_slice`)."""
    global _next
    if _slice is not None:
        for _ in range(len(_slice)):
            candidate = _slice[_next]
            _next = (_next + 1) % len(_slice)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    # Without SO_REUSEADDR: a port with connections in TIME_WAIT is
                    # passed over too, so a server never starts beside its predecessor's.
                    sock.bind(("127.0.0.1", candidate))
                except OSError:
                    continue
                return candidate
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ephemeral_high() -> int:
    """The top of the kernel's ephemeral port range (Linux's default where unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 60_999


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll ``predicate`` until it returns a truthy value, or raise ``TimeoutError``.

    Exceptions raised by the predicate count as "not yet": servers that are still
    starting refuse connections, and that is exactly what we are waiting out.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # "not ready yet" comes in many shapes
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise TimeoutError(f"{what} not met within {timeout:.1f}s{detail}")
        time.sleep(interval)


def _listening_inodes(port: int) -> set[str] | None:
    """The socket inodes listening on TCP ``port`` (IPv4 and IPv6); None without /proc."""
    found: set[str] = set()
    read_any = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read_any = True
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.add(inode)
    return found if read_any else None


def listened_by(session: int, port: int) -> bool:
    """Does a process of ``session`` (a child started in a session of its own, and what it
    started) listen on ``port``? True where /proc cannot tell.

    A free port is free only when it is picked: another server (another test worker's) can
    take it before the child binds it, and the child then exits with "address in use"
    while the other answers the readiness URL. Readiness counts only when the listener is
    the child's.
    """
    inodes = _listening_inodes(port)
    if inodes is None:
        return True
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in _session_members(session):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    return True
    return False


def _session_members(session: int) -> list[int]:
    """The session leader first, then the other processes of its session."""
    members = [session]
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == session:
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            # after the command's closing parenthesis: state ppid pgrp session ...
            if int(stat.rsplit(")", 1)[1].split()[3]) == session:
                members.append(int(entry))
    return members


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """True when ``url`` answers 2xx; any error is False."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            status: int = resp.status
            return 200 <= status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


class ManagedProcess:
    """One child process with its log file, started and stopped by us.

    The child gets its own process group so that stopping it also stops whatever it
    started; it is stopped with SIGTERM, then SIGKILL after ``stop_timeout`` seconds.
    """

    #: The server is this child or runs in its session (``listened_by`` checks readiness
    #: against it); a subclass whose server runs elsewhere (a container) says False.
    LISTENS_ITSELF = True

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        ready_url: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.ready_url = ready_url
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def start(self, ready_timeout: float = 30.0) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(self.env or {})},
                cwd=self.cwd,
                start_new_session=True,
            )
        finally:
            log.close()
        if self.ready_url is not None:
            self.wait_ready(self.ready_url, ready_timeout)
        return self

    def wait_ready(self, url: str, timeout: float) -> None:
        port = urllib.parse.urlsplit(url).port

        def ready() -> bool:
            if not self.alive():
                raise NotReadyError(f"{self.argv[0]} exited early:\n{self.log_tail()}")
            if not http_ok(url):
                return False
            return port is None or not self.LISTENS_ITSELF or listened_by(self.pid, port)

        try:
            wait_until(ready, timeout, what=f"{url} ready")
        except (TimeoutError, NotReadyError) as exc:
            self.stop()
            raise NotReadyError(f"{exc}\n--- log of {self.argv[0]} ---\n{self.log_tail()}") from exc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def signal(self, signum: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signum)

    def stop(self, stop_timeout: float = 10.0) -> int | None:
        """Stop the child (SIGTERM, then SIGKILL) and return its exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(stop_timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait(stop_timeout)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL, no goodbye: for crash tests."""
        if self.alive():
            self.signal(signal.SIGKILL)
            assert self.proc is not None
            self.proc.wait(10)

    def __enter__(self) -> ManagedProcess:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
