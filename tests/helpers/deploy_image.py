"""Build and run the fleetwatch image with podman, as the deployment tests need it.

podman runs here as root with runc and the cgroupfs manager (crun fails on these
machines' cgroups) and a containers.conf without default ulimits (not permitted here);
scripts/build-image.sh writes that file and builds the image without network.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from fleetwatch.procs import ManagedProcess

REPO = Path(__file__).resolve().parents[2]
#: Named after the checkout, like the tag (deploy/conftest.py): test runs of two checkouts
#: at once never share a build folder, a containers.conf being rewritten, or an image.
CHECKOUT = hashlib.sha256(str(REPO).encode()).hexdigest()[:10]
IMAGE_WORK = Path(os.environ.get("FLEETWATCH_IMAGE_WORK", f"/var/tmp/fleetwatch-image-{CHECKOUT}"))
CONTAINERS_CONF = IMAGE_WORK / "containers.conf"
PODMAN = ["podman", "--runtime", "/usr/sbin/runc", "--cgroup-manager", "cgroupfs"]


class PodmanUnavailable(RuntimeError):
    """podman cannot build or run here: the test fails with this reason, it does not skip."""


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def build_image(tag: str) -> str:
    """Build the image offline with scripts/build-image.sh and return its tag."""
    for tool in ("podman", "debootstrap"):
        if shutil.which(tool) is None:
            raise PodmanUnavailable(f"{tool} is not installed (scripts/install.sh installs it)")
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-image.sh"), tag],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "FLEETWATCH_IMAGE_WORK": str(IMAGE_WORK)},
    )
    if done.returncode != 0:
        # pip's warnings about the machine's extra index folders drown the reason.
        errors = [line for line in done.stderr.splitlines() if "Location 'file:" not in line]
        raise PodmanUnavailable("image build failed:\n" + "\n".join(errors[-40:]))
    return tag


def podman(
    *args: str, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PODMAN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=podman_env(),
        cwd=cwd,
    )


class Container(ManagedProcess):
    """``podman run`` in the foreground as a managed process; removed by name when stopped."""

    def __init__(
        self,
        image: str,
        name: str,
        args: list[str],
        log_path: Path,
        *,
        mounts: dict[Path, str] | None = None,
        env: dict[str, str] | None = None,
        ready_url: str | None = None,
        writable: dict[Path, str] | None = None,
        options: list[str] | None = None,
    ) -> None:
        argv = [*PODMAN, "run", "--rm", "--name", name, "--network=host", *(options or [])]
        for host, inside in (mounts or {}).items():
            argv += ["-v", f"{host}:{inside}:ro"]
        for host, inside in (writable or {}).items():
            argv += ["-v", f"{host}:{inside}:rw"]
        for key, value in (env or {}).items():
            argv += ["-e", f"{key}={value}"]
        argv += [image, *args]
        super().__init__(argv, log_path, ready_url=ready_url, env=podman_env())
        self.name = name

    #: The container's processes run under conmon, outside this child's session.
    LISTENS_ITSELF = False

    def __enter__(self) -> Container:
        super().__enter__()
        return self

    def stop(self, stop_timeout: float = 10.0) -> int | None:
        code = super().stop(stop_timeout)
        podman("rm", "--force", "--ignore", self.name)
        return code

    def exec(self, *argv: str) -> str:
        done = podman("exec", self.name, *argv)
        assert done.returncode == 0, done.stderr
        return done.stdout


def probed_ok(metrics: str, cluster: str) -> bool:
    """The exporter's last probe of ``cluster`` succeeded (``1`` or ``1.0``, any other labels)."""
    pattern = (
        rf'^fleetwatch_cluster_probe_success\{{cluster="{re.escape(cluster)}"[^}}]*\}} 1(\.0)?$'
    )
    return re.search(pattern, metrics, re.MULTILINE) is not None
