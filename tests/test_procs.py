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

from fleetwatch.procs import ManagedProcess, NotReadyError, _ephemeral_low, free_port, listened_by


def test_a_free_port_is_below_the_kernels_ephemeral_range_and_bindable() -> None:
    """So that no ``bind(port 0)`` (another worker's aiohttp test server) takes it between
    the pick and the server's own bind."""
    for _ in range(20):
        port = free_port()
        assert port < _ephemeral_low()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


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
