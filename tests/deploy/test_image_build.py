"""The image builds the way users build images: ``podman build -f Containerfile .`` in a checkout.

scripts/build-image.sh builds offline from a wheelhouse it makes on the host (what the other
image tests run); here a copy of the checkout as git has it (no ``wheelhouse/``, nothing git
ignores) builds with wheels from PyPI, as on a machine with a registry and a package index.

Two things of these machines are handed to the build, and nothing else: the base image,
when the default one cannot be pulled (no registry is reachable here: the Debian base that
build-image.sh makes instead), and the host's CA bundle for pip (``--cert`` through the
``PIP_OPTIONS`` build argument, the bundle mounted for the build only): the machine's
egress re-signs TLS with a CA only the host trusts, as a corporate proxy does. The test
skips only when this machine cannot reach PyPI at all.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.deploy_image import CHECKOUT, REPO, podman

#: The Dockerfile's default base; pulled when a registry answers.
DEFAULT_BASE = "docker.io/library/python:3.11-slim-bookworm"
#: What scripts/build-image.sh makes with debootstrap when no registry answers.
OFFLINE_BASE = os.environ.get("BASE_IMAGE", "localhost/fleetwatch-base:bookworm")
#: Where the host's CA bundle is mounted during the build (not kept in the image's files).
BUILD_CA = "/run/fleetwatch-host-ca.pem"


def test_containerfile_is_the_dockerfile() -> None:
    """One file: podman reads ``Containerfile``, docker ``Dockerfile``, and they cannot drift."""
    assert (REPO / "Dockerfile").is_file() and not (REPO / "Dockerfile").is_symlink()
    assert os.readlink(REPO / "Containerfile") == "Dockerfile"


def test_the_build_context_lets_in_every_package_the_wheel_needs() -> None:
    """``.dockerignore`` lists what may enter the context: every package and what they link to."""
    allowed = {
        line[1:].strip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {
        p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    linked = {
        Path(os.path.normpath(link.parent / os.readlink(link))).relative_to(REPO).parts[0]
        for link in (REPO / "fleetwatch").rglob("*")
        if link.is_symlink()
    }
    needed = packages | linked | {"pyproject.toml", "README.md", "wheelhouse"}
    assert needed <= allowed, f"missing from .dockerignore's list: {sorted(needed - allowed)}"
    assert not (REPO / ".containerignore").exists(), "podman would read it instead"


def pypi_unreachable(cafile: str | None) -> str | None:
    """Why this machine cannot reach PyPI, or None when it can."""
    try:
        context = ssl.create_default_context(cafile=cafile)
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10, context=context):
            return None
    except (urllib.error.URLError, OSError) as exc:
        return f"PyPI cannot be reached from this machine: {exc}"


def host_ca_bundle() -> str | None:
    """The CA bundle the host's pip trusts (``PIP_CERT``, else OpenSSL's default file)."""
    for given in (os.environ.get("PIP_CERT"), ssl.get_default_verify_paths().cafile):
        if given and Path(given).is_file():
            return str(Path(given).resolve())
    return None


def copy_of_the_checkout(destination: Path) -> Path:
    """The files of a clone of this checkout, with the working tree's content.

    ``git ls-files``, not ``git clone``: a clone would build the last commit and miss the
    change being tested; this copies what a clone holds and nothing git ignores (no
    ``wheelhouse/``, no virtualenv), symlinks as symlinks.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if not os.path.lexists(source):  # deleted in the working tree, not yet committed
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return destination


def base_image(request: pytest.FixtureRequest) -> str:
    """The Dockerfile's default base when it can be pulled, else the offline one."""
    if podman("pull", "--quiet", DEFAULT_BASE, timeout=300).returncode == 0:
        return DEFAULT_BASE
    request.getfixturevalue("image")  # scripts/build-image.sh makes the offline base
    assert podman("image", "exists", OFFLINE_BASE).returncode == 0, (
        f"no base image: {DEFAULT_BASE} cannot be pulled and {OFFLINE_BASE} does not exist "
        "(scripts/build-image.sh makes it)"
    )
    return OFFLINE_BASE


@pytest.mark.live
@pytest.mark.timeout(900)  # a build from PyPI's wheels: minutes on a fresh machine
def test_a_fresh_checkout_builds_with_wheels_from_pypi(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    cafile = host_ca_bundle()
    unreachable = pypi_unreachable(cafile)
    if unreachable:
        pytest.skip(unreachable)
    context = copy_of_the_checkout(tmp_path / "checkout")
    assert not (context / "wheelhouse").exists()
    base = base_image(request)
    tag = f"localhost/fleetwatch:fresh-{CHECKOUT}"
    options = [] if base == DEFAULT_BASE else ["--build-arg", f"BASE_IMAGE={base}"]
    if cafile:
        options += [
            "-v",
            f"{cafile}:{BUILD_CA}:ro",
            "--build-arg",
            f"PIP_OPTIONS=--cert {BUILD_CA}",
        ]
    try:
        # --layers=false: no untagged build stage is left behind to remove.
        done = podman(
            "build",
            "--layers=false",
            *options,
            "--build-arg",
            "REVISION=fresh-checkout",
            "-t",
            tag,
            "-f",
            "Containerfile",
            ".",
            timeout=600,
            cwd=context,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "fleetwatch: wheels from the package index" in done.stdout

        ran = podman("run", "--rm", "--network=none", tag, "--version")
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.startswith("fleetwatch, version 0.1.0 (revision: fresh-checkout,"), (
            ran.stdout
        )
        inspected = podman("image", "inspect", tag)
        assert inspected.returncode == 0, inspected.stderr
        config = json.loads(inspected.stdout)[0]["Config"]
        assert (config["User"], config["Entrypoint"]) == ("65532:65532", ["fleetwatch"])
        assert config["Labels"]["org.opencontainers.image.revision"] == "fresh-checkout"
    finally:
        podman("rmi", "--force", "--ignore", tag)
