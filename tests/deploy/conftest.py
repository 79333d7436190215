"""The image, built once per test session: every deployment test that runs it shares it."""

from __future__ import annotations

import os

import pytest
from deploy_image import build_image

TAG = "localhost/fleetwatch:test"


@pytest.fixture(scope="session")
def image() -> str:
    """Built with scripts/build-image.sh (about a minute); fails with the reason if it cannot.

    ``FLEETWATCH_TEST_IMAGE=TAG`` uses an image built before instead (while working on the
    tests; CI leaves it unset and builds from the checkout).
    """
    return os.environ.get("FLEETWATCH_TEST_IMAGE") or build_image(TAG)
