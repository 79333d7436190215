"""fleetwatch.procs: the free port and the readiness that every server a test starts
relies on (the CI run in which an Alertmanager lost its port to a reactor of the same
test, and the reactor's ``/-/ready`` answered for it)."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleetwatch import procs
from fleetwatch.procs import ManagedProcess, NotReadyError, free_port, listened_by


def test_a_test_workers_free_ports_are_its_own_above_the_ephemeral_range() -> None:
    """No ``bind`` to port 0 (another worker's aiohttp test server) and no other worker
    of the run takes a port between its pick and the server's own bind."""
    mine = procs._slice
    assert mine is not None, "tests/conftest.py gives every worker a slice"
    assert mine.start > procs._ephemeral_high()
    others = [procs.use_port_slice(i, 4) for i in range(4)]
    try:
        assert all(o is not None for o in others)
        assert sum(len(o or ()) for o in others) == len({p for o in others for p in o or ()})
        picked = [free_port() for _ in range(20)]
        assert set(picked) <= set(others[3] or ()) and len(set(picked)) == 20  # in turn
        for port in picked:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))
    finally:
        procs._slice = mine


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def someone_elses_server() -> Iterator[int]:
    """An HTTP server of this test's process answering 200 on every path: its port."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.live
def test_a_url_answered_by_another_process_is_not_the_child_ready(
    tmp_path: Path, someone_elses_server: int
) -> None:
    port = someone_elses_server
    idle = [sys.executable, "-c", "import time; time.sleep(60)"]
    child = ManagedProcess(idle, tmp_path / "idle.log", ready_url=f"http://127.0.0.1:{port}/")
    with pytest.raises(NotReadyError):
        child.start(ready_timeout=1.0)
    assert not child.alive()  # stopped, by its pid, when it did not become ready


@pytest.mark.live
def test_the_childs_own_listener_is_ready(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    with ManagedProcess(argv, tmp_path / "own.log", ready_url=f"http://127.0.0.1:{port}/") as proc:
        assert listened_by(proc.pid, port)
        assert not listened_by(proc.pid, free_port())
