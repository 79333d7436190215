"""Two replicas upserting the same newly discovered clusters at once, on PostgreSQL.

Every replica run with ``--discovery.kubernetes`` watches the same Secrets and upserts the
same clusters (``reactor.apidiscovery``), so a new Secret is inserted by all of them at
the same moment. The loser's insert meets the winner's row (a unique violation once the
winner commits, or a deadlock when they took the names in opposite orders): a
:class:`~reactor.store.StoreConflict`, run again by ``retry_conflicts``, which then finds
the rows and adds nothing. Each name ends as one row; no caller sees an error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from reactor.service import DiscoveredCluster, Service
from reactor.store import retry_conflicts
from reactor.store.postgres import PostgresStore
from tests.helpers.reactor_postgres import PostgresServer

pytestmark = pytest.mark.live

CLUSTERS = 300


@pytest.fixture
def url(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database("race")
    PostgresStore(url).close()  # the schema
    yield url
    postgres_server.drop_database(url)


def found(reverse: bool) -> list[DiscoveredCluster]:
    clusters = [
        DiscoveredCluster(f"c{i:03d}", f"https://c{i:03d}:6443", f"secret://ns/c{i:03d}")
        for i in range(CLUSTERS)
    ]
    return clusters[::-1] if reverse else clusters


@pytest.mark.parametrize("opposite", [False, True], ids=["same-order", "opposite-orders"])
def test_replicas_inserting_the_same_new_clusters_at_once_end_with_one_row_each(
    url: str, opposite: bool
) -> None:
    start = threading.Barrier(2)
    results: list[tuple[int, int] | BaseException] = [(-1, -1), (-1, -1)]

    def replica(i: int) -> None:
        service = Service(PostgresStore(url, migrate=False))
        batch = found(reverse=opposite and i == 1)
        try:
            start.wait()
            results[i] = retry_conflicts(lambda: service.upsert_discovered(batch))
        except BaseException as exc:  # handed to the test thread
            results[i] = exc
        finally:
            service.store.close()

    threads = [threading.Thread(target=replica, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for result in results:
        assert not isinstance(result, BaseException), result
    added = [r[0] for r in results if isinstance(r, tuple)]
    assert sum(added) == CLUSTERS  # each name added once, by one replica or the other
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT name) FROM clusters").fetchone()
    assert rows == (CLUSTERS, CLUSTERS)
