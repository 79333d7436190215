"""Discovery's tests are pure, but for the ones marked ``live`` (a stand-in API server)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "live: talks to a real local server (the stand-in API server) on 127.0.0.1"
    )
