"""Fixtures of the reactor tests: an app on a temporary SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry
from reactor_helpers import MakeClient

from reactor.app import Scanner, create_app
from reactor.context import Settings


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "fleetwatch.db"


@pytest.fixture
def make_client(aiohttp_client: Any, db_path: Path) -> MakeClient:
    """Start a reactor app on ``db_path``; keyword arguments go to :class:`Settings`."""

    async def make(
        discoverer: Scanner | None = None,
        registry: CollectorRegistry | None = None,
        **settings: Any,
    ) -> TestClient[Any, Any]:
        settings.setdefault("db_path", db_path)
        app = create_app(Settings(**settings), registry=registry, discoverer=discoverer)
        client: TestClient[Any, Any] = await aiohttp_client(app)
        return client

    return make
