"""Fixtures of the reactor tests: an app on a temporary database, SQLite or PostgreSQL.

Every test that takes ``db_path`` or ``make_client`` runs twice, once per store
(``[sqlite]``, ``[postgresql]``). For SQLite ``db_path`` is the file; for PostgreSQL it is
a small file holding the URL of a fresh database of the session's server, which
``reactor_helpers.dump_db``, ``open_store`` and ``db_flag`` understand, so a test reads the
state the same way on both. The PostgreSQL 15 server is started once per session in a
temporary folder and stopped at the end; when PostgreSQL is not installed the
``[postgresql]`` tests fail and say so.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from reactor.app import Scanner, create_app
from reactor.context import ReactorSettings
from reactor.store.database import POSTGRESQL, SQLITE
from tests.helpers.reactor_helpers import POSTGRES_URL_SUFFIX, MakeClient, postgres_url
from tests.helpers.reactor_postgres import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL 15 server for the whole session, in a folder of our own (not pytest's
    numbered basetemp, which a concurrent run may rotate away under the server)."""
    root = Path(tempfile.mkdtemp(prefix="fleetwatch-pg-"))
    server = PostgresServer(root)  # PostgresMissing (not installed): the tests fail with it
    try:
        server.init().start()
        yield server
    finally:
        server.stop()
        server.remove()


@pytest.fixture(params=[SQLITE, pytest.param(POSTGRESQL, marks=pytest.mark.live)])
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The test's database: a SQLite file, or a file naming a fresh PostgreSQL database."""
    if request.param == SQLITE:
        return tmp_path / "fleetwatch.db"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    path = tmp_path / f"fleetwatch{POSTGRES_URL_SUFFIX}"
    path.write_text(server.create_database())
    return path


@pytest.fixture
def make_client(aiohttp_client: Any, db_path: Path) -> MakeClient:
    """Start a reactor app on ``db_path``; keyword arguments go to :class:`ReactorSettings`."""

    async def make(
        discoverer: Scanner | None = None,
        registry: CollectorRegistry | None = None,
        **settings: Any,
    ) -> TestClient[Any, Any]:
        url = postgres_url(db_path)
        if url is not None and "db_path" not in settings:
            settings.setdefault("db_url", url)
        settings.setdefault("db_path", db_path)
        app = create_app(ReactorSettings(**settings), registry=registry, discoverer=discoverer)
        client: TestClient[Any, Any] = await aiohttp_client(app)
        return client

    return make
