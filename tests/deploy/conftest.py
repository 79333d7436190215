"""The image, built once per test session: every deployment test that runs it shares it."""

from __future__ import annotations

import pytest
from deploy_image import build_image

TAG = "localhost/fleetwatch:test"


@pytest.fixture(scope="session")
def image() -> str:
    """Built with scripts/build-image.sh (about a minute); fails with the reason if it cannot."""
    return build_image(TAG)
