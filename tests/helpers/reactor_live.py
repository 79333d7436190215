"""A ``fleetwatch reactor`` process with a bearer token, for tests that call it over HTTP
as an outside client would (schemathesis, a generated client)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fleetwatch.procs import ManagedProcess, free_port

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
