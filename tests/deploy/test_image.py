"""The image built from the Containerfile runs every part, as the non-root user.

Built once per session with podman (base from debootstrap, no network during the build):
the exporter in the container probes a stand-in fleet on the host network and becomes
ready; the reactor in the container becomes ready on SQLite (and on PostgreSQL where the
reactor tests' server is available). If podman cannot build or run here, the tests fail
with the reason: an image nobody can build is a broken deliverable, not a skipped one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetwatch.procs import free_port, wait_until
from fleetwatch.standin import ThreadedFleet
from tests.helpers.deploy_image import Container, podman, probed_ok
from tests.helpers.quiet_http import fetch

# The first test builds the image (tests/deploy/conftest.py), minutes on a fresh machine.
pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def shared_dir() -> Iterator[Path]:
    """A folder the container's user (65532) can read: pytest's tmp folders are 0700."""
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"fleetwatch-image-test-{os.getpid()}"
    root.mkdir(mode=0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def readable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def get(url: str) -> tuple[int, str]:
    return fetch(url, timeout=2)


def test_every_subcommand_runs_as_the_non_root_user(image: str) -> None:
    """Every subcommand ``fleetwatch --help`` lists answers ``--help`` in the image."""
    done = podman("run", "--rm", "--network=host", image, "--help")
    assert done.returncode == 0, done.stderr
    commands = re.findall(r"^    ([a-z][a-z-]*)  ", done.stdout, re.MULTILINE)
    assert {"exporter", "reactor", "discover", "rules", "status", "demo"} <= set(commands)
    # One container for all of them: each `podman run` costs 2-3 s here.
    script = "; ".join(
        [
            "id -u",
            "fleetwatch --version",
            *(f"fleetwatch {c} --help >/dev/null 2>&1 || echo failed: {c}" for c in commands),
            "command -v gcc cc pip || true",
        ]
    )
    done = podman("run", "--rm", "--network=host", "--entrypoint", "sh", image, "-c", script)
    assert done.returncode == 0, done.stderr
    user, version, *rest = done.stdout.splitlines()
    assert user == "65532"
    assert version.startswith("fleetwatch") and " 0.1.0 " in version, version
    assert rest == [], f"failed subcommands, or tools the final stage should not carry: {rest}"


def test_exporter_in_the_container_probes_the_fleet(
    image: str, shared_dir: Path, tmp_path: Path
) -> None:
    with ThreadedFleet(shared_dir / "fleet") as fleet:
        fleet.add_clusters(2, prefix="img")
        kubeconfig = fleet.write_kubeconfig(shared_dir / "kubeconfig")
        readable(shared_dir)
        port = free_port()
        with Container(
            image,
            f"fw-exporter-{port}",
            [
                "exporter",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--kubeconfig={kubeconfig}",
                "--probe.interval=1",
            ],
            tmp_path / "exporter.log",
            mounts={shared_dir: str(shared_dir)},
            ready_url=f"http://127.0.0.1:{port}/-/ready",
        ) as exporter:

            def probed() -> bool:
                _, text = get(f"http://127.0.0.1:{port}/metrics")
                return all(probed_ok(text, f"img-{i:03d}") for i in range(1, 3))

            wait_until(probed, 30, what="both stand-in clusters probed from the container")
            assert get(f"http://127.0.0.1:{port}/-/healthy")[0] == 200
            user = exporter.exec("sh", "-c", "id -u")
            assert user.strip() == "65532"


def test_reactor_in_the_container_on_sqlite(image: str, tmp_path: Path) -> None:
    port = free_port()
    with Container(
        image,
        f"fw-reactor-{port}",
        ["reactor", f"--web.listen-address=127.0.0.1:{port}"],
        tmp_path / "reactor.log",
        ready_url=f"http://127.0.0.1:{port}/-/ready",
    ) as reactor:
        status, body = get(f"http://127.0.0.1:{port}/clusters")
        assert (status, json.loads(body)) == (200, [])
        files = reactor.exec("ls", "/var/lib/fleetwatch")
        assert "fleetwatch.db" in files.split()
