"""Fixtures of the reactor tests: an app on a temporary SQLite file, state dumps."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from reactor.app import Scanner, create_app
from reactor.context import Settings

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


def dump_db(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read-only (works while a reactor has the file open)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            t: db.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
            for t in ("clusters", "outages", "apps")
        }
    finally:
        db.close()


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
