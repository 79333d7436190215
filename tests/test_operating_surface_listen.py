"""``--web.listen-address`` repeated, as the exporter-toolkit takes it: both servers answer
on every address given, and one address that cannot be bound fails the start, named.

Before: a repeated flag silently kept the last address.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from fleetwatch.procs import ManagedProcess, free_port, wait_until

pytestmark = pytest.mark.live


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def argv(command: str, tmp_path: Path, *addresses: str) -> list[str]:
    flags = [f"--web.listen-address={address}" for address in addresses]
    if command == "exporter":
        rest = ["--kubeconfig=", f"--kubeconfig.dir={tmp_path / 'none'}", "--probe.interval=1"]
    else:
        rest = [f"--db.path={tmp_path / 'state.db'}", "--kubeconfig="]
    return [sys.executable, "-m", "fleetwatch.cli", command, *flags, *rest]


@pytest.mark.parametrize("command", ["exporter", "reactor"])
def test_every_listen_address_given_is_served(tmp_path: Path, command: str) -> None:
    ports = [free_port(), free_port()]
    addresses = [f"127.0.0.1:{port}" for port in ports]
    with ManagedProcess(argv(command, tmp_path, *addresses), tmp_path / f"{command}.log") as proc:
        for address in addresses:
            wait_until(
                lambda a=address: answers(f"http://{a}/-/healthy"),
                30,
                what=f"{command} on {address}",
            )
        for address in addresses:
            assert address in proc.log_tail(), "the start line names every address"


@pytest.mark.parametrize("command", ["exporter", "reactor"])
def test_one_address_that_cannot_be_bound_fails_the_start_and_names_it(
    tmp_path: Path, command: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        taken = f"127.0.0.1:{busy.getsockname()[1]}"
        out = subprocess.run(
            argv(command, tmp_path, f"127.0.0.1:{free_port()}", taken),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 1
    assert f"cannot listen on {taken}" in out.stderr
