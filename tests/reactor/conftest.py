"""Fixtures of the reactor tests: an app on a temporary database, SQLite or PostgreSQL.

Every test that takes ``db_path`` or ``make_client`` runs twice, once per store
(``[sqlite]``, ``[postgresql]``). For SQLite ``db_path`` is the file; for PostgreSQL it is
a small file holding the URL of a fresh database of the session's server, which
``reactor_helpers.dump_db``, ``open_store`` and ``db_flag`` understand, so a test reads the
state the same way on both. The PostgreSQL 15 server is started once per session in a
temporary folder and stopped at the end; when PostgreSQL is not installed the
``[postgresql]`` tests fail and say so.

The CD tests' ``start`` (a reactor acting on the stand-in management cluster's fleet) and
``management_process`` (that cluster in a process of its own) are here too: several test
modules share them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from fleetwatch.standin.management import ManagementCluster, ManagementProcess
from reactor.app import Scanner, create_app
from reactor.context import ReactorSettings
from reactor.store.database import POSTGRESQL, SQLITE
from tests.helpers.reactor_cd import FLEET, Start, add_clusters, cd_settings
from tests.helpers.reactor_cd_replicas import CdFleet, reader, seed_store
from tests.helpers.reactor_helpers import (
    POSTGRES_URL_SUFFIX,
    MakeClient,
    mirrored,
    notify,
    postgres_url,
    until,
)
from tests.helpers.reactor_payloads import ONLINE, alert
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


@pytest.fixture
def start(mgmt: ManagementCluster, aiohttp_client: Any, db_path: Path) -> Start:
    """(The management cluster first: it stops after the reactor.)

    The CD tests' reactor on ``db_path`` with ``--cd.flux --cd.argocd`` on ``mgmt``; the
    clusters c1 and c2 added as discovery names them (Secret refs), the fleet of
    ``reactor_cd`` seeded, both clusters ONLINE unless ``online`` is False. Keyword
    arguments go to :class:`CdSettings`."""

    async def started(
        registry: CollectorRegistry | None = None, online: bool = True, **cd: Any
    ) -> Any:
        settings = ReactorSettings(db_path=db_path, db_url=postgres_url(db_path))
        cd_ = cd_settings(str(mgmt.kubeconfig), **cd)
        client = await aiohttp_client(create_app(settings, registry=registry, cd=cd_))
        await add_clusters(client)
        mgmt.seed(FLEET)
        if online:
            await notify(client, alert(ONLINE, "c1", 0), alert(ONLINE, "c2", 0))
        if not cd.get("dry_run"):  # a dry run writes no row: nothing to wait for
            await until(lambda: mirrored(client, lambda apps: len(apps) == 8))
        return client

    return started


@pytest.fixture
def management_process(tmp_path: Path) -> Iterator[ManagementProcess]:
    """The stand-in management cluster in a process of its own, for tests that run
    ``fleetwatch reactor`` processes against it."""
    with ManagementProcess(tmp_path / "mgmt", bookmark_seconds=0.5) as process:
        yield process


@pytest.fixture
def cd_fleet(postgres_server: PostgresServer, management_process: ManagementProcess) -> CdFleet:
    """A database of the session's PostgreSQL with c1 ONLINE, the fleet of ``reactor_cd``
    seeded in the management cluster's process, and a reader of those objects' state."""
    url = postgres_server.create_database("cd")
    seed_store(url)
    management_process.seed(FLEET)
    return url, management_process, reader(management_process)
