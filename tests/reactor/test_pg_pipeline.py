"""Deployments pipelined from the event loop (``reactor.store.pg_pipeline``) on a real PostgreSQL.

What must hold as it did on a store thread: each deployment is its own transaction (an
error in one leaves the next on its lane alone), the gate is decided under the cluster's
lock (a deployment that waited for a notification sees what it committed), a connection
the server ended is replaced with no caller seeing it when nothing had run, and one lost
with deployments in flight answers them 503.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from reactor.service import Service
from reactor.statemachine import Status
from reactor.store import Placement, StoreBusy, StoreConflict, StoreUnavailable, pg_pipeline
from reactor.store.pg_connection import Connector, Reachability
from reactor.store.pg_pipeline import Lane, PipelinedDeploys, numbered, queued_sync, text_array
from reactor.store.postgres import DEPLOY, PostgresStore
from tests.helpers.reactor_helpers import until
from tests.helpers.reactor_postgres import PostgresServer

pytestmark = pytest.mark.live

REFUSED = (Status.OFFLINE,)
APPS = 200
APP_NAME = "fleetwatch-reactor"  #: the application_name of the reactor's connections


@pytest.fixture
def url(postgres_server: PostgresServer) -> Iterator[str]:
    """Clusters c1 and c2 (UNKNOWN), apps app-1 ... app-N PENDING on c1."""
    url = seeded(postgres_server)
    yield url
    postgres_server.drop_database(url)


def seeded(postgres_server: PostgresServer) -> str:
    """A new database as :func:`url` describes it; its URL."""
    url = postgres_server.create_database("pipe")
    store = PostgresStore(url)
    service = Service(store)
    service.add_cluster("c1", "https://127.0.0.1:6443", "c1-secret")
    service.add_cluster("c2", "https://127.0.0.1:6444", "c2-secret")
    with store.write() as tx:
        tx.cur.execute(  # type: ignore[attr-defined]
            "INSERT INTO apps (name, cluster_id, status) SELECT 'app-' || i, "
            "(SELECT id FROM clusters WHERE name = 'c1'), 'PENDING' "
            "FROM generate_series(1, %s) i",
            (APPS,),
        )
    store.close()
    return url


def pipelined(url: str, lanes: int = 2, busy_timeout_s: float = 5.0) -> PipelinedDeploys:
    return PipelinedDeploys(
        Connector(url, None, 2.0), Reachability(), busy_timeout_s=busy_timeout_s, lanes=lanes
    )


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """What ``sql`` reads on a connection of its own: what was committed."""
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def app_row(url: str, app: str) -> tuple[str, str]:
    """(its cluster, its status)."""
    sql = "SELECT c.name, a.status FROM apps a JOIN clusters c ON c.id = a.cluster_id "
    ((cluster, status),) = rows(url, sql + "WHERE a.name = %s", app)
    return cluster, status


def lane_backends(url: str) -> set[int]:
    sql = "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = "
    return {int(pid) for (pid,) in rows(url, sql + "current_database()", APP_NAME)}


def lock_waits(url: str) -> int:
    ((count,),) = rows(url, "SELECT count(*) FROM pg_locks WHERE NOT granted")
    return int(count)


@asynccontextmanager
async def held(
    url: str, deploys: PipelinedDeploys, app: str
) -> AsyncIterator[tuple[Any, asyncio.Future[Any]]]:
    """A transaction holding c1's row, as a notification does, and a deployment of ``app``
    to c1 waiting for it (seen waiting by the server); the transaction's connection is
    closed on exit."""
    holder = psycopg.connect(url)
    try:
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM clusters WHERE name = 'c1' FOR UPDATE")
        deployment = asyncio.ensure_future(deploys.deploy(app, "c1", REFUSED))
        await until(lambda: lock_waits(url) > 0, what="the deployment to wait for the lock")
        yield holder, deployment
    finally:
        holder.close()


@pytest.fixture
async def deploys(url: str) -> AsyncIterator[PipelinedDeploys]:
    """Deployments pipelined on one lane to the test's database; closed at its end."""
    one_lane = pipelined(url, lanes=1)
    yield one_lane
    one_lane.close()


def test_the_statement_and_its_array_in_the_servers_own_forms() -> None:
    assert numbered("a = %s AND b = %s OR c <> ALL(%s)") == b"a = $1 AND b = $2 OR c <> ALL($3)"
    assert numbered(DEPLOY).count(b"$") == 3
    assert text_array(["OFFLINE"]) == b'{"OFFLINE"}'
    assert text_array(['a"b', "c\\d"]) == b'{"a\\"b","c\\\\d"}'


async def test_a_deployment_answers_as_the_store_does(url: str) -> None:
    deploys = pipelined(url)
    store = PostgresStore(url, migrate=False)
    try:
        place = await deploys.deploy("app-1", "c2", REFUSED)
        by_store = store.deploy("app-2", "c2", REFUSED)
        assert by_store is not None and place is not None
        assert place.cluster_id == by_store.cluster_id
        assert place.cluster_status is by_store.cluster_status is Status.UNKNOWN
        assert place.app_id == by_store.app_id - 1  # app-1, then app-2
        assert app_row(url, "app-1") == ("c2", "DEPLOYED")
        assert await deploys.deploy("no-such-app", "c2", REFUSED) is None
        assert await deploys.deploy("app-3", "no-such-cluster", REFUSED) is None
        assert app_row(url, "app-3") == ("c1", "PENDING")
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE clusters SET status = 'OFFLINE' WHERE name = 'c2'")
        refused = await deploys.deploy("app-4", "c2", REFUSED)
        assert refused is not None and refused.cluster_status is Status.OFFLINE
        assert app_row(url, "app-4") == ("c1", "PENDING")  # the gate wrote nothing
    finally:
        deploys.close()
        store.close()


async def test_many_at_once_each_commit_and_share_the_lanes(url: str) -> None:
    deploys = pipelined(url, lanes=4)
    try:
        places = await asyncio.gather(
            *(deploys.deploy(f"app-{i}", "c2", REFUSED) for i in range(1, APPS + 1))
        )
        assert all(isinstance(p, Placement) for p in places)
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM apps a JOIN clusters c ON c.id = a.cluster_id "
                "WHERE c.name = 'c2' AND a.status = 'DEPLOYED'"
            ).fetchone()
        assert row == (APPS,)
        opened = [lane for lane in deploys.lanes if lane.conn is not None]
        assert 1 < len(opened) <= 4
        assert len(lane_backends(url)) == len(opened)
    finally:
        deploys.close()


@pytest.mark.parametrize("queued", [True, False], ids=["sync-queued", "sync-written"])
async def test_an_error_in_one_deployment_leaves_the_next_on_its_lane_alone(
    url: str, queued: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One lane: the second deployment is sent behind the first, which waits for a lock
    and fails; the second still commits, since each ends with its own Sync (queued with
    the others of its turn, or, where libpq cannot queue one, written at once)."""
    if not queued:
        monkeypatch.setattr(pg_pipeline, "queued_sync", lambda: None)
    deploys = pipelined(url, lanes=1, busy_timeout_s=0.3)
    holder = psycopg.connect(url)
    try:
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM clusters WHERE name = 'c1' FOR UPDATE")
        first = asyncio.ensure_future(deploys.deploy("app-1", "c1", REFUSED))
        second = asyncio.ensure_future(deploys.deploy("app-2", "c2", REFUSED))
        with pytest.raises(StoreBusy):
            await first
        place = await second
        assert place is not None and place.cluster_status is Status.UNKNOWN
        assert app_row(url, "app-2") == ("c2", "DEPLOYED")
        assert app_row(url, "app-1") == ("c1", "PENDING")
    finally:
        holder.close()
        deploys.close()


async def test_the_gate_sees_what_the_notification_holding_the_cluster_committed(
    url: str, deploys: PipelinedDeploys
) -> None:
    """The deployment waits for the cluster's row while a notification holds it, then is
    judged on what that notification committed: OFFLINE, so refused and nothing written."""
    async with held(url, deploys, "app-5") as (notification, deployment):
        notification.execute("UPDATE clusters SET status = 'OFFLINE' WHERE name = 'c1'")
        notification.execute("UPDATE apps SET status = 'DEGRADED' WHERE name = 'app-6'")
        notification.execute("COMMIT")
        place = await deployment
        assert place is not None and place.cluster_status is Status.OFFLINE
        assert app_row(url, "app-5") == ("c1", "PENDING")


async def test_a_connection_ended_while_idle_costs_no_caller_anything(
    url: str,
    postgres_server: PostgresServer,
    caplog: pytest.LogCaptureFixture,
    deploys: PipelinedDeploys,
) -> None:
    """Ended and its goodbye not yet read (the loop has not run since): the socket is
    asked before use, and the deployment never goes out on the dead connection."""
    caplog.set_level(logging.INFO, logger="reactor.store.pg_pipeline")
    await deploys.deploy("app-1", "c2", REFUSED)
    (before,) = lane_backends(url)
    with postgres_server.admin() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (before,))
    deadline = time.monotonic() + 10
    while before in lane_backends(url):  # blocking: the loop reads nothing meanwhile
        assert time.monotonic() < deadline, "the backend did not end"
    await deploys.deploy("app-2", "c2", REFUSED)
    assert app_row(url, "app-2") == ("c2", "DEPLOYED")
    assert lane_backends(url) - {before}
    assert "closed it while idle" in caplog.text
    assert "sent again" not in caplog.text


async def test_a_session_ended_under_a_waiting_deployment_runs_it_again(
    url: str, postgres_server: PostgresServer, deploys: PipelinedDeploys
) -> None:
    """Ended while the deployment waited for a lock: the server said so before answering
    it, so it never committed, and it is sent again on a new connection."""
    await deploys.deploy("app-1", "c2", REFUSED)  # the lane is open
    (before,) = lane_backends(url)
    async with held(url, deploys, "app-7") as (holder, deployment):
        with postgres_server.admin() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (before,))
        await until(lambda: lane_backends(url) - {before}, what="a new connection")
        await until(lambda: lock_waits(url) > 0, what="the deployment, again, to wait for the lock")
        holder.execute("COMMIT")
        place = await deployment
        assert place is not None and place.cluster_status is Status.UNKNOWN
        assert app_row(url, "app-7") == ("c1", "DEPLOYED")


async def test_a_connection_lost_with_deployments_in_flight_answers_them_503(
    url: str, deploys: PipelinedDeploys
) -> None:
    """Lost without a word from the server: each may have committed, so none is sent again."""
    async with held(url, deploys, "app-8") as (holder, deployment):
        lane = deploys.lanes[0]
        assert lane.conn is not None
        lane.close("cut by the test")  # as a network cut: the socket gone, no answer
        with pytest.raises(StoreUnavailable):
            await deployment
        holder.execute("ROLLBACK")
        assert await deploys.deploy("app-9", "c2", REFUSED) is not None  # a new connection


async def test_an_unreachable_database_answers_503_at_once_then_recovers(
    postgres_server: PostgresServer, url: str
) -> None:
    reach = Reachability()
    connector = Connector(url, None, 2.0)
    opens = 0
    real_open = connector.open

    def counted_open(lock_timeout_s: float) -> Any:
        nonlocal opens
        opens += 1
        return real_open(lock_timeout_s)

    connector.open = counted_open  # type: ignore[method-assign]
    deploys = PipelinedDeploys(connector, reach, busy_timeout_s=5.0, lanes=1)
    try:
        postgres_server.stop()
        try:
            with pytest.raises(StoreUnavailable):
                await deploys.deploy("app-1", "c2", REFUSED)
            assert reach.paused() and opens >= 1
            tried = opens  # the next calls fail at once: without a connect (counted, not timed)
            with pytest.raises(StoreUnavailable):
                await deploys.deploy("app-1", "c2", REFUSED)
            assert opens == tried
        finally:
            postgres_server.start()

        async def deployed() -> bool:
            try:
                return await deploys.deploy("app-1", "c2", REFUSED) is not None
            except StoreUnavailable:
                return False

        deadline = time.monotonic() + 10
        while not await deployed():
            assert time.monotonic() < deadline, "no deployment after the database came back"
            await asyncio.sleep(0.1)
    finally:
        deploys.close()


async def test_a_lost_race_runs_again(
    url: str, monkeypatch: pytest.MonkeyPatch, deploys: PipelinedDeploys
) -> None:
    """A serialization failure or a deadlock is a StoreConflict: the deployment runs again
    (the store's retry_conflicts, on the loop)."""
    real = deploys._run
    losses = iter([True, True, False])

    async def losing(params: list[bytes]) -> Any:
        if next(losses):
            raise StoreConflict("lost a race with another transaction")
        return await real(params)

    monkeypatch.setattr(deploys, "_run", losing)
    assert await deploys.deploy("app-1", "c2", REFUSED) is not None
    assert app_row(url, "app-1") == ("c2", "DEPLOYED")


async def test_a_caller_that_goes_away_leaves_its_lane_working(
    url: str, deploys: PipelinedDeploys
) -> None:
    """A deployment already sent runs on (as it would on a store thread): the caller's
    answer is dropped, and the deployments behind it still get theirs."""
    async with held(url, deploys, "app-10") as (holder, deployment):
        behind = asyncio.ensure_future(deploys.deploy("app-11", "c2", REFUSED))
        await asyncio.sleep(0)  # sent behind it
        deployment.cancel()
        holder.execute("COMMIT")
        assert await behind is not None
        assert app_row(url, "app-10") == ("c1", "DEPLOYED")
        assert app_row(url, "app-11") == ("c2", "DEPLOYED")
        assert await deploys.deploy("app-12", "c2", REFUSED) is not None


async def test_a_deployment_waiting_for_a_lock_does_not_hold_up_the_next_lane(url: str) -> None:
    """One lane waits for c1's lock (a notification holds it); the next deployment goes to
    the lane with fewer in flight and commits meanwhile."""
    deploys = pipelined(url, lanes=2)
    try:
        async with held(url, deploys, "app-13") as (holder, waiting):
            place = await asyncio.wait_for(deploys.deploy("app-14", "c2", REFUSED), 10)
            assert place is not None and app_row(url, "app-14") == ("c2", "DEPLOYED")
            assert not waiting.done()
            holder.execute("COMMIT")
            assert await waiting is not None
    finally:
        deploys.close()


def app_version(url: str, app: str) -> str:
    """The app row's ``xmin``: the transaction that wrote its current version."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT xmin::text FROM apps WHERE name = %s", (app,)).fetchone()
    assert row is not None
    return str(row[0])


async def test_a_deployment_that_changes_nothing_writes_no_new_row_version(url: str) -> None:
    """Deployed there again (a pipeline's next run): the same answer, the row untouched;
    one that changes the app (another cluster, or DEGRADED with a reason) still writes."""
    deploys = pipelined(url, lanes=1)
    try:
        first = await deploys.deploy("app-1", "c2", REFUSED)
        written = app_version(url, "app-1")
        again = await deploys.deploy("app-1", "c2", REFUSED)
        assert again == first
        assert app_version(url, "app-1") == written
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE apps SET status = 'DEGRADED', reason = 'r' WHERE name = 'app-1'")
        degraded = app_version(url, "app-1")
        assert await deploys.deploy("app-1", "c2", REFUSED) == first
        assert app_version(url, "app-1") != degraded
        assert app_row(url, "app-1") == ("c2", "DEPLOYED")
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT reason FROM apps WHERE name = 'app-1'").fetchone()
        assert row == (None,)
        assert await deploys.deploy("app-1", "c1", REFUSED) is not None
        assert app_row(url, "app-1") == ("c1", "DEPLOYED")
    finally:
        deploys.close()


async def test_the_deployments_of_one_turn_of_the_loop_leave_in_one_write(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queued with libpq's PQsendPipelineSync (found in the libpq psycopg loaded), each
    with its own Sync: one write for all of them, and each still commits alone. (Two
    writes: the turn's statement first, which finds none of them settled, PENDING as they
    are; then all of them alone, in one.)"""
    if queued_sync() is None:
        pytest.skip("this libpq cannot queue a Sync (older than 17)")
    writes = 0
    real = Lane._write

    def counted(lane: Lane) -> None:
        nonlocal writes
        writes += 1
        real(lane)

    monkeypatch.setattr(Lane, "_write", counted)
    deploys = pipelined(url, lanes=1)
    try:
        await deploys.deploy("app-1", "c2", REFUSED)  # the lane is open
        writes = 0
        places = await asyncio.gather(
            *(deploys.deploy(f"app-{i}", "c2", REFUSED) for i in range(2, 22))
        )
        assert all(isinstance(p, Placement) for p in places)
        assert writes == 2
        assert {app_row(url, f"app-{i}") for i in range(2, 22)} == {("c2", "DEPLOYED")}
    finally:
        deploys.close()


async def test_where_libpq_cannot_queue_a_sync_each_is_written_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older libpq: each Sync is written as it comes, and many at once still commit."""
    monkeypatch.setattr(pg_pipeline, "queued_sync", lambda: None)
    deploys = pipelined(url, lanes=2)
    try:
        places = await asyncio.gather(
            *(deploys.deploy(f"app-{i}", "c2", REFUSED) for i in range(1, 41))
        )
        assert all(isinstance(p, Placement) for p in places)
        assert {app_row(url, f"app-{i}") for i in range(1, 41)} == {("c2", "DEPLOYED")}
    finally:
        deploys.close()


def transaction_id_after_deploy(url: str, app: str, cluster: str) -> object:
    """The transaction id the deployment statement took (None: it locked and wrote
    nothing, so its commit has nothing to flush)."""
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute(DEPLOY, (cluster, app, [s.value for s in REFUSED]))
        row = conn.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()
    assert row is not None
    return row[0]


async def test_a_settled_deployment_locks_and_writes_nothing_and_a_cascade_takes_it(
    url: str,
) -> None:
    """Already DEPLOYED there: answered from what is committed, without waiting for a
    notification that holds the cluster, and with no transaction id (nothing to flush).
    That notification, committing OFFLINE, then degrades it with the others; a
    deployment that changes the app still waits for it and is refused."""
    assert transaction_id_after_deploy(url, "app-1", "c1") is not None  # PENDING: written
    assert transaction_id_after_deploy(url, "app-1", "c1") is None  # settled
    deploys = pipelined(url, lanes=2)
    try:
        async with held(url, deploys, "app-2") as (notification, changing):
            settled = await asyncio.wait_for(deploys.deploy("app-1", "c1", REFUSED), 10)
            assert settled is not None and settled.cluster_status is Status.UNKNOWN
            assert not changing.done()
            notification.execute("UPDATE clusters SET status = 'OFFLINE' WHERE name = 'c1'")
            notification.execute(
                "UPDATE apps SET status = 'DEGRADED' WHERE status = 'DEPLOYED' "
                "AND cluster_id = (SELECT id FROM clusters WHERE name = 'c1')"
            )
            notification.execute("COMMIT")
            refused = await changing
            assert refused is not None and refused.cluster_status is Status.OFFLINE
            assert app_row(url, "app-1") == ("c1", "DEGRADED")
            assert app_row(url, "app-2") == ("c1", "PENDING")
            again = await deploys.deploy("app-1", "c1", REFUSED)  # OFFLINE: not settled
            assert again is not None and again.cluster_status is Status.OFFLINE
    finally:
        deploys.close()


def names(first: int, last: int) -> list[str]:
    return [f"app-{i}" for i in range(first, last + 1)]


def shape_turn(url: str) -> None:
    """c3 OFFLINE; app-1 ... app-20 DEPLOYED on c2 (settled), app-21 ... app-25 DEPLOYED on
    c3 (refused there), app-26 ... app-30 DEGRADED with a reason on c2; app-31 on PENDING
    on c1; and an app whose name the text array must quote."""
    store = PostgresStore(url, migrate=False)
    Service(store).add_cluster("c3", "https://127.0.0.1:6445", "c3-secret")
    store.close()
    cluster = "(SELECT id FROM clusters WHERE name = %s)"
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE clusters SET status = 'OFFLINE' WHERE name = 'c3'")
        conn.execute(
            f"INSERT INTO apps (name, cluster_id, status) VALUES (%s, {cluster}, 'DEPLOYED')",
            (ODD_NAME, "c2"),
        )
        for apps, where, status, reason in (
            (names(1, 20), "c2", "DEPLOYED", None),
            (names(21, 25), "c3", "DEPLOYED", None),
            (names(26, 30), "c2", "DEGRADED", "cluster_offline"),
        ):
            conn.execute(
                f"UPDATE apps SET cluster_id = {cluster}, status = %s, reason = %s "
                "WHERE name = ANY(%s)",
                (where, status, reason, apps),
            )


#: A name the API accepts (printable) that a ``text[]`` literal must quote and escape.
ODD_NAME = 'we"ird\\app, {x} NULL'
#: One turn: settled, refused (c3 OFFLINE), changing (DEGRADED, or moved from c1), unknown.
TURN = [
    *((app, "c2") for app in names(1, 20)),
    *((app, "c3") for app in names(21, 25)),
    *((app, "c2") for app in names(26, 35)),
    ("no-such-app", "c2"),
    ("app-36", "no-such-cluster"),
    ("no-such-app", "no-such-cluster"),
    (ODD_NAME, "c2"),
]
#: Deployments of TURN that the turn's statement cannot settle: sent alone after it.
NOT_SETTLED = 15


def final_rows(url: str) -> list[tuple[Any, ...]]:
    return rows(
        url,
        "SELECT a.id, a.name, c.name, a.status, a.reason, a.outage_id FROM apps a "
        "JOIN clusters c ON c.id = a.cluster_id ORDER BY a.id",
    )


def counted_sends(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The statements lanes send from now on (each one round trip), by name."""
    sent: list[bytes] = []
    real = Lane.send

    def counting(lane: Lane, params: list[bytes], *args: Any, **kwargs: Any) -> Any:
        sent.append(args[0] if args else kwargs.get("statement", pg_pipeline.STATEMENT))
        return real(lane, params, *args, **kwargs)

    monkeypatch.setattr(Lane, "send", counting)
    return sent


async def test_a_turns_deployments_answer_as_each_alone_would(
    url: str, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settled, refused, changing and unknown deployments in one turn of the loop (shuffled):
    each answered as the store answers it alone, deployment by deployment, on a twin
    database, and the apps left the same; the settled and the unknown by the turn's one
    statement, only the others sent alone."""
    turn = list(TURN)
    random.Random(34).shuffle(turn)
    twin = seeded(postgres_server)
    try:
        shape_turn(url)
        shape_turn(twin)
        store = PostgresStore(twin, migrate=False)
        try:
            alone = [store.deploy(app, cluster, REFUSED) for app, cluster in turn]
        finally:
            store.close()
        deploys = pipelined(url, lanes=2)
        try:
            await deploys.deploy("app-1", "c2", REFUSED)  # a lane open: the turn is all there is
            sent = counted_sends(monkeypatch)
            places = await asyncio.gather(*(deploys.deploy(a, c, REFUSED) for a, c in turn))
        finally:
            deploys.close()
        assert places == alone
        assert final_rows(url) == final_rows(twin)
        assert sent.count(pg_pipeline.TURN_STATEMENT) == 1
        assert sent.count(pg_pipeline.STATEMENT) == NOT_SETTLED
        by_app = dict(zip(turn, places, strict=True))
        assert by_app[("app-1", "c2")] is not None
        assert by_app[("app-1", "c2")].cluster_status is Status.UNKNOWN
        refused = by_app[("app-21", "c3")]
        assert refused is not None and refused.cluster_status is Status.OFFLINE
        assert by_app[(ODD_NAME, "c2")] is not None
        assert by_app[("no-such-app", "c2")] is None
        assert app_row(url, "app-26") == ("c2", "DEPLOYED")
        assert app_row(url, "app-31") == ("c2", "DEPLOYED")
        assert app_row(url, "app-21") == ("c3", "DEPLOYED")  # refused: untouched
    finally:
        postgres_server.drop_database(twin)


async def test_one_deployment_in_its_turn_is_sent_alone_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch, deploys: PipelinedDeploys
) -> None:
    """A quiet replica: no statement asks before it, so no round trip is added."""
    sent = counted_sends(monkeypatch)
    for _ in range(3):
        assert await deploys.deploy("app-1", "c2", REFUSED) is not None
    assert sent == [pg_pipeline.STATEMENT] * 3


async def test_a_notification_racing_a_turn_refuses_or_degrades_each(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notification holds c1 (making it OFFLINE, its cascade run, not committed) while a
    turn deploys ten apps settled on c1 and five that are not: the turn's statement waits
    for nothing and answers the settled ones from what is committed; the others wait for
    the lock. The notification commits: the settled ones are DEGRADED by its cascade, the
    others refused; none is DEPLOYED on the OFFLINE cluster (the gate's rule)."""
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE apps SET status = 'DEPLOYED' WHERE name = ANY(%s)", (names(1, 10),))
    deploys = pipelined(url, lanes=2)
    holder = psycopg.connect(url)
    try:
        await deploys.deploy("app-20", "c2", REFUSED)  # a lane open, to ask the turn on
        holder.execute("BEGIN")
        holder.execute("UPDATE clusters SET status = 'OFFLINE' WHERE name = 'c1'")
        holder.execute(
            "UPDATE apps SET status = 'DEGRADED', reason = 'cluster_offline' "
            "WHERE status = 'DEPLOYED' AND cluster_id = (SELECT id FROM clusters WHERE name = 'c1')"
        )
        sent = counted_sends(monkeypatch)
        settled = [asyncio.ensure_future(deploys.deploy(a, "c1", REFUSED)) for a in names(1, 10)]
        waiting = [asyncio.ensure_future(deploys.deploy(a, "c1", REFUSED)) for a in names(11, 15)]
        places = await asyncio.wait_for(asyncio.gather(*settled), 10)
        assert {p.cluster_status if p else None for p in places} == {Status.UNKNOWN}
        await until(lambda: lock_waits(url) > 0, what="the others to wait for the lock")
        assert not any(w.done() for w in waiting)
        holder.execute("COMMIT")
        refused = await asyncio.wait_for(asyncio.gather(*waiting), 10)
        assert {p.cluster_status if p else None for p in refused} == {Status.OFFLINE}
        assert {app_row(url, a) for a in names(1, 10)} == {("c1", "DEGRADED")}
        assert {app_row(url, a) for a in names(11, 15)} == {("c1", "PENDING")}
        assert sent.count(pg_pipeline.TURN_STATEMENT) == 1
    finally:
        holder.close()
        deploys.close()


async def test_a_turns_statement_lost_with_its_connection_sends_each_alone(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The turn's statement writes nothing, so when its connection is lost (here while a
    migration-like lock on the apps table holds it up) its deployments are each sent
    alone, on a new connection, and none answers 503."""
    caplog.set_level(logging.INFO, logger="reactor.store.pg_pipeline")
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE apps SET status = 'DEPLOYED' WHERE name = ANY(%s)", (names(1, 10),))
    deploys = pipelined(url, lanes=1)
    holder = psycopg.connect(url)
    try:
        await deploys.deploy("app-1", "c1", REFUSED)  # the lane is open
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE apps IN ACCESS EXCLUSIVE MODE")
        turn = [asyncio.ensure_future(deploys.deploy(a, "c1", REFUSED)) for a in names(1, 10)]
        await until(lambda: lock_waits(url) > 0, what="the turn's statement to wait")
        deploys.lanes[0].close("cut by the test")
        await until(lambda: lock_waits(url) > 0 and "sent alone" in caplog.text, what="again")
        holder.execute("ROLLBACK")
        places = await asyncio.wait_for(asyncio.gather(*turn), 10)
        assert {p.cluster_status if p else None for p in places} == {Status.UNKNOWN}
    finally:
        holder.close()
        deploys.close()


async def test_a_deployment_that_moves_its_app_or_was_refused_is_sent_alone_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its app's last deployment here put it on another cluster, or was refused: most
    likely not settled, so nothing is asked before it, however many share its turn; an
    app deployed again where it was is asked with the others of its turn."""
    deploys = pipelined(url, lanes=2)
    try:
        await asyncio.gather(*(deploys.deploy(a, "c2", REFUSED) for a in names(1, 10)))
        sent = counted_sends(monkeypatch)
        await asyncio.gather(*(deploys.deploy(a, "c1", REFUSED) for a in names(1, 10)))
        assert sent == [pg_pipeline.STATEMENT] * 10
        assert {app_row(url, a) for a in names(1, 10)} == {("c1", "DEPLOYED")}
        sent.clear()
        await asyncio.gather(*(deploys.deploy(a, "c1", REFUSED) for a in names(1, 10)))
        assert sent == [pg_pipeline.TURN_STATEMENT]
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE clusters SET status = 'OFFLINE' WHERE name = 'c2'")
        for _ in range(2):  # moved, then refused last time
            sent.clear()
            places = await asyncio.gather(*(deploys.deploy(a, "c2", REFUSED) for a in names(1, 5)))
            assert {p.cluster_status if p else None for p in places} == {Status.OFFLINE}
            assert sent == [pg_pipeline.STATEMENT] * 5
    finally:
        deploys.close()
