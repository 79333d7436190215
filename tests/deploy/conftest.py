"""The image, built once per test run: every deployment test that runs it shares it."""

from __future__ import annotations

import fcntl
import os

import pytest

from tests.helpers.deploy_image import CHECKOUT, build_image

#: One tag per checkout: a run in another worktree at the same time builds its own.
TAG = f"localhost/fleetwatch:test-{CHECKOUT}"


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory, testrun_uid: str) -> str:
    """Built with scripts/build-image.sh (about a minute); fails with the reason if it cannot.

    Under pytest-xdist every worker has its own session: the first to get here builds,
    under a lock in the folder the run's workers share, and the others wait for it and
    find the build done (``testrun_uid`` tells this run's mark from an earlier run's).

    ``FLEETWATCH_TEST_IMAGE=TAG`` uses an image built before instead (while working on the
    tests; CI leaves it unset and builds from the checkout).
    """
    given = os.environ.get("FLEETWATCH_TEST_IMAGE")
    if given:
        return given
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    with open(shared / "fleetwatch-image.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = shared / "fleetwatch-image.built"
        if not built.exists() or built.read_text() != testrun_uid:
            build_image(TAG)
            built.write_text(testrun_uid)
    return TAG
