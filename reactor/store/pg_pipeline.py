"""Deployments on PostgreSQL, sent from the event loop in libpq's pipeline mode.

Why: ``POST /deployments`` is the reactor's hot path (every CD pipeline asks it before it
deploys), and on PostgreSQL it cost about 340 µs of reactor CPU against 130 µs on SQLite
(bench/RESULTS.md §4c). Its statement was already one round trip; the cost was around
it: each call went to a store thread and back (two hand-overs under the GIL) and through
psycopg's cursor, about 90 µs of Python per execute. Here a deployment never leaves the
event loop:

- Up to ``--db.writers`` connections ("lanes"), each in pipeline mode and non-blocking,
  their sockets watched by the loop. A deployment goes to the lane with the fewest
  deployments in flight (a lane is opened when every open one is busy), as the store's
  prepared statement (``reactor.store.postgres``: the cluster read ``FOR SHARE``, the gate
  decided in SQL under that lock, the app written; an app settled there already only
  read) followed by a Sync. The Sync ends the implicit transaction: each deployment
  commits alone, as before, and an error in one never touches another.
- The server runs a lane's statements in the order sent and answers in that order, so
  each answer resolves the deployment at the front of the lane's queue. Deployments in
  flight together on a lane share its round trips; lanes commit in parallel, and the
  server flushes their commits together. One waiting for a cluster's lock (a
  notification holds it) holds up those behind it on its lane, for the lock timeout at
  most; new ones go to the lanes with fewer in flight.
- The libpq calls go through psycopg's own binding (``psycopg.pq``): a few C calls per
  deployment, no cursor and no adaptation (three text parameters, four text columns).
- What a lane is given in one turn of the event loop leaves in one write: each statement
  and its Sync queued by libpq's ``PQsendPipelineSync`` (libpq 17+; psycopg does not bind
  it: :func:`queued_sync`), written once every ready handler has run. A write per
  deployment (a ``send``, the server woken) cost as much as the HTTP answer's own
  (bench/RESULTS.md). With an older libpq each Sync is written as it comes.
- The deployments of one turn of the event loop (many, under load) are first asked
  together, in one read-only statement on one lane (``reactor.store.postgres.SETTLED``:
  what each deployment's own statement reads before it decides). Those it finds settled
  (the app DEPLOYED there already, no reason, no outage, the cluster allowed: a pipeline
  deploying again, the common case) or naming an unknown app or cluster are answered from
  it, as their own statement would have answered them from what was committed when it
  started (READ COMMITTED); the others are each sent as above, alone, under the cluster's
  lock. So a deployment that is not settled costs one round trip more, and only when it
  shared its turn with others; one alone in its turn (a quiet replica) is sent at once.
  So is one whose app's last deployment on this replica put it on another cluster or was
  refused: most likely not settled, and asking first would only add that round trip (a
  pipeline that moves apps, or retries while its cluster is OFFLINE). This hint chooses
  the path, never the answer: sent alone, a deployment is answered right whatever it is.
  The statement locks nothing, so a notification holding a cluster holds none of them up;
  one racing it still takes the settled apps along in its cascade (they are DEPLOYED
  there), which is the gate's rule. One answer per deployment: that statement failing,
  however (even its connection lost: it wrote nothing), sends each of its deployments
  alone, so one bad name never fails the others.

What a deployment keeps from the store thread: the statement and its guarantees, the
connections (``reactor.store.pg_connection.Connector``: the password file, the lock timeout,
keepalives), the errors (a lost race run again, a lock not granted a 503 StoreBusy, an
unreachable database a 503 with the reconnect pause the store's handles share).

A lane's connection that the server closes while idle is replaced before the next
deployment: the loop reads its goodbye as it comes, and an idle lane's socket is asked
before use, as the store's connections are. A deployment that did not run is sent once
more on a new connection: its write failed (its Sync, the commit, is the last thing
written), or the server ended the session before answering it (``pg_terminate_backend``,
a shutdown: its transaction rolled back, the deployments behind it never read). A
connection lost otherwise while deployments are in flight answers them 503: each may have
committed.

Long because the lanes, their connections' life and the turn's statement belong together:
each reads and writes the lanes' queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import operator
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import psycopg
from psycopg import errors, pq

from reactor.statemachine import Status
from reactor.store import (
    CONFLICT_ATTEMPTS,
    Placement,
    StoreConflict,
    StoreUnavailable,
    conflict_pause_s,
)
from reactor.store.pg_connection import (
    Connection,
    Connector,
    Reachability,
    closed_by_server,
    first_line,
)
from reactor.store.postgres import DEPLOY, SETTLED, store_error

log = logging.getLogger(__name__)

#: A cluster's status as the statement's row gives it (bytes) -> the status.
_STATUSES = {s.value.encode(): s for s in Status}
#: How busy a lane is, for ``min`` (the lane with the fewest deployments in flight).
_INFLIGHT = operator.attrgetter("inflight")

#: The name of the prepared deployment statement on each lane's connection.
STATEMENT = b"fleetwatch_deploy"
#: The name of the prepared statement that asks a turn's deployments together.
TURN_STATEMENT = b"fleetwatch_settled"
#: Deployments asked in one such statement at most (more in a turn: several statements).
TURN_MAX = 256
#: Apps whose last cluster is kept, to send a deployment that moves one alone at once.
PLACED_MAX = 1 << 17

#: A deployment's row, as ``reactor.store.postgres.DEPLOY`` gives it.
Row = tuple[bytes | None, ...]
#: What the turn's statement answers a deployment it did not settle: send it alone.
_ALONE: Any = object()
#: Where a refused deployment left its app, as the hint has it: no cluster (names are never
#: empty), so that the next deployment of that app, refused again or not, is sent alone.
_NOWHERE = ""


def numbered(sql: str) -> bytes:
    """``sql`` with psycopg's ``%s`` marks turned into the server's ``$1, $2...``."""
    parts = sql.split("%s")
    out = parts[0]
    for i, part in enumerate(parts[1:], start=1):
        out += f"${i}{part}"
    return out.encode()


def text_array(values: Collection[str]) -> bytes:
    """A ``text[]`` parameter in PostgreSQL's text form, sorted (one set, one form)."""
    return text_list([v.encode() for v in sorted(values)])


def text_list(values: Iterable[bytes]) -> bytes:
    """A ``text[]`` parameter in PostgreSQL's text form, in order, each element quoted."""
    quoted = (b'"' + v.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"' for v in values)
    return b"{" + b",".join(quoted) + b"}"


@cache
def queued_sync() -> Callable[[int], int] | None:
    """libpq's ``PQsendPipelineSync(PGconn *)``: a Sync queued, not written (1 on success).

    From the one libpq this process has mapped, where psycopg's connections live (its
    own copy in psycopg-binary, else the system's); None when there is not exactly one
    (not Linux) or it is older than 17. ``PyDLL`` keeps the GIL: the call never blocks
    (the connection is non-blocking) and costs under a microsecond.
    """
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/libpq" in line.rsplit(" ", 1)[-1]}
    except OSError:
        return None
    if len(paths) != 1:
        return None
    try:
        function = ctypes.PyDLL(paths.pop()).PQsendPipelineSync
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


@dataclass(slots=True)
class _InFlight:
    """One statement sent on a lane: its caller's future, and its answer so far (one
    deployment's row or, ``many``, every row: the turn's statement)."""

    future: asyncio.Future[Any]
    many: bool = False
    row: Any = None
    error: psycopg.Error | None = None


class _NotRun(Exception):
    """The deployment did not run and can be sent again on a new connection: writing it
    failed (its Sync, the commit, is the last thing written), or the server ended the
    session before answering it (``pg_terminate_backend``, a shutdown: its transaction
    was rolled back, and the statements behind it were never read)."""


#: A session ended by the server (the answer of whatever it was running or about to run).
_SESSION_ENDED = (errors.AdminShutdown, errors.CrashShutdown, errors.IdleSessionTimeout)


@dataclass(eq=False)
class Lane:
    """One connection in pipeline mode, driven by the event loop."""

    pool: PipelinedDeploys
    conn: Connection | None = None
    opening: asyncio.Task[Connection] | None = None
    #: sent and not answered, oldest first
    queue: deque[_InFlight] = field(default_factory=deque)
    #: deployments given to this lane and not answered (waiting for it to open included)
    inflight: int = 0
    #: the socket the loop watches
    fd: int = -1
    #: a write of what libpq holds is due at the end of this turn of the loop
    write_due: bool = False

    async def connected(self) -> Connection:
        """This lane's connection, opened now if it has none (one opening at a time)."""
        if self.conn is not None:
            return self.conn
        opening = self.opening
        if opening is None or _failed(opening):  # a failure is not kept for later callers
            opening = self.opening = asyncio.ensure_future(self.pool.open())
            # every waiter may have gone (their requests cancelled): nobody left to read it
            opening.add_done_callback(_seen)
        try:
            conn = await asyncio.shield(opening)
        finally:
            if self.opening is opening and opening.done():
                self.opening = None
        if self.conn is None:
            if conn.closed:  # installed by another waiter, and lost since: open anew
                return await self.connected()
            self._install(conn)  # the first waiter to wake installs it
        return self.conn if self.conn is not None else conn

    def _install(self, conn: Connection) -> None:
        pg = conn.pgconn
        pg.nonblocking = 1
        pg.enter_pipeline_mode()
        self.conn = conn
        self.fd = pg.socket
        asyncio.get_running_loop().add_reader(self.fd, self._readable)

    def send(
        self,
        params: list[bytes],
        statement: bytes = STATEMENT,
        many: bool = False,
        now: bool = False,
    ) -> asyncio.Future[Any]:
        """Send one deployment (``many``: the turn's statement); its future gets the
        statement's row (every row) or its error. ``now``: written at once, with what
        this lane holds (called at the end of a turn).

        Queued in libpq with its Sync, and written with the others of this turn of the loop
        (:meth:`_write`); written at once where libpq cannot queue a Sync."""
        conn = self.conn
        assert conn is not None
        pg = conn.pgconn
        loop = asyncio.get_running_loop()
        sync = queued_sync()
        try:
            pg.send_query_prepared(statement, params)
            if sync is None:
                pg.pipeline_sync()
                if pg.flush():  # the socket's buffer is full: the rest goes when it drains
                    loop.add_writer(self.fd, self._writable)
            elif sync(pg.pgconn_ptr) != 1:  # type: ignore[attr-defined]  # not in pq.abc
                raise psycopg.OperationalError(pg.get_error_message())
            elif now:
                self.write_due = True  # below, once it is in the queue
            elif not self.write_due:
                self.write_due = True
                loop.call_soon(self._write)
        except psycopg.OperationalError as exc:
            self.close(f"sending failed: {first_line(exc)}")
            raise _NotRun from exc
        sent = _InFlight(loop.create_future(), many)
        self.queue.append(sent)
        if now and sync is not None:
            self._write()  # a failure closes the lane: ``sent`` answered with the others
        return sent.future

    def _write(self) -> None:
        """Write what this turn of the loop queued: one ``send``. A failure closes the lane
        and its deployments in flight answer 503 (some may have gone out), as when the
        socket drains (:meth:`_writable`)."""
        self.write_due = False
        conn = self.conn
        if conn is None:
            return
        try:
            if conn.pgconn.flush():  # the socket's buffer is full: the rest when it drains
                asyncio.get_running_loop().add_writer(self.fd, self._writable)
        except psycopg.OperationalError as exc:
            self.close(f"connection lost: {first_line(exc)}")

    def _writable(self) -> None:
        conn = self.conn
        if conn is None:
            return
        try:
            if conn.pgconn.flush() == 0:
                asyncio.get_running_loop().remove_writer(self.fd)
        except psycopg.OperationalError as exc:
            self.close(f"connection lost: {first_line(exc)}")

    def _readable(self) -> None:
        """Read what the server sent: answers of the deployments in flight, in order, or,
        on an idle connection, its goodbye (then the lane closes)."""
        conn = self.conn
        if conn is None:
            return
        pg = conn.pgconn
        try:
            pg.consume_input()
            nulls = 0
            while self.queue and not pg.is_busy():
                result = pg.get_result()
                if result is None:  # the end of one statement's results
                    nulls += 1
                    if nulls > 1:
                        break
                    continue
                nulls = 0
                self._take(result)
        except psycopg.OperationalError as exc:
            self.close(f"connection lost: {first_line(exc)}")
            return
        if pg.status == pq.ConnStatus.BAD:
            self.close("the server closed the connection")

    def idle_and_closed(self) -> bool:
        """Whether the server closed this idle lane's connection (its goodbye is waiting
        in the socket, not read yet): checked before a deployment is sent on it."""
        return self.conn is not None and not self.queue and closed_by_server(self.conn)

    def _take(self, result: pq.abc.PGresult) -> None:
        head = self.queue[0]
        status = result.status
        if status == pq.ExecStatus.PIPELINE_SYNC:  # its transaction is over
            self.queue.popleft()
            self.pool.answered(self, head)
        elif status == pq.ExecStatus.TUPLES_OK:
            if head.many:
                get, fields = result.get_value, range(result.nfields)
                head.row = [tuple(get(r, i) for i in fields) for r in range(result.ntuples)]
            elif result.ntuples:
                head.row = tuple(result.get_value(0, i) for i in range(result.nfields))
        elif status == pq.ExecStatus.FATAL_ERROR:
            head.error = _error(result)
        else:  # PIPELINE_ABORTED cannot happen: every statement has its own Sync
            head.error = psycopg.InternalError(f"unexpected result {pq.ExecStatus(status).name}")

    def close(self, why: str) -> None:
        """Close the connection. The deployments in flight answer 503 (each may have
        committed), unless the server said it ended the session before answering the
        oldest: then none of them ran, and each is sent again on a new connection."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        # By the number watched: libpq may have closed the socket already (on reading
        # the end of the stream), and its number may be reused by the next connection.
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.fd)
        loop.remove_writer(self.fd)
        conn.close()
        lost = list(self.queue)
        self.queue.clear()
        head = lost[0] if lost else None
        ended = head is not None and head.row is None and isinstance(head.error, _SESSION_ENDED)
        if ended:
            log.info("%s: %d deployment(s) in flight sent again", why, len(lost))
        elif lost:
            log.warning("%s: %d deployment(s) in flight answer 503", why, len(lost))
        else:
            log.info("deployment connection closed: %s", why)
        for sent in lost:
            if not sent.future.done():
                sent.future.set_exception(
                    _NotRun()
                    if ended
                    else StoreUnavailable(f"the database connection was lost ({why})")
                )


def _answer(waiting: asyncio.Future[Any], answer: Any) -> None:
    if not waiting.done():  # its caller went away
        waiting.set_result(answer)


def _seen(task: asyncio.Future[Connection]) -> None:
    if not task.cancelled():
        task.exception()


def _close_when_open(task: asyncio.Future[Connection]) -> None:
    if not _failed(task):
        task.result().close()


def _failed(task: asyncio.Future[Connection]) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)


def _error(result: pq.abc.PGresult) -> psycopg.Error:
    """The psycopg exception a failed statement stands for (its class from the SQLSTATE)."""
    code = result.error_field(pq.DiagnosticField.SQLSTATE)
    message = (result.error_message or b"").decode("utf-8", "replace").strip()
    cls: type[psycopg.Error] = psycopg.DatabaseError
    if code is not None:
        with contextlib.suppress(KeyError):
            cls = errors.lookup(code.decode())
    return cls(message)


class PipelinedDeploys:
    """The deployments of one replica on PostgreSQL, on the event loop (module docstring).

    ``lanes``: connections at most (``--db.writers``); opened as the load needs them.
    """

    def __init__(
        self,
        connector: Connector,
        reach: Reachability,
        *,
        busy_timeout_s: float,
        lanes: int,
    ) -> None:
        self.connector = connector
        self.reach = reach
        self.busy_timeout_s = busy_timeout_s
        self.lanes = [Lane(self) for _ in range(max(1, lanes))]
        #: the last ``refused`` given and its array (the gate's, the same every call)
        self._refused: tuple[Collection[Status], bytes] | None = None
        #: the deployments of this turn of the loop, waiting for its end (module docstring)
        self._turn: list[tuple[list[bytes], asyncio.Future[Any]]] = []
        #: where each app's last deployment here put it (or _NOWHERE: refused): a hint,
        #: never an answer (module docstring); at most PLACED_MAX apps, forgotten at once
        self._placed: dict[str, str] = {}

    async def deploy(self, app: str, cluster: str, refused: Collection[Status]) -> Placement | None:
        """The store's ``deploy``: None when the app or the cluster is unknown."""
        last = self._refused
        if last is None or last[0] is not refused:
            last = self._refused = (refused, text_array([s.value for s in refused]))
        params = [cluster.encode(), app.encode(), last[1]]
        placed = self._placed
        if placed.get(app, cluster) != cluster:  # moved: not settled, so no use asking
            row = await self._alone(params)
        else:
            waiting = asyncio.get_running_loop().create_future()
            self._turn.append((params, waiting))
            if len(self._turn) == 1:
                asyncio.get_running_loop().call_soon(self._end_turn)
            row = await waiting
            if row is _ALONE:
                row = await self._alone(params)
        if row is None or row[0] is None or row[1] is None or row[2] is None:
            placed.pop(app, None)
            return None
        status = _STATUSES.get(row[2]) or Status(row[2].decode())
        if len(placed) >= PLACED_MAX:
            placed.clear()
        placed[app] = _NOWHERE if status in refused else cluster
        return Placement(int(row[0]), int(row[1]), status)

    async def _alone(self, params: list[bytes]) -> Row | None:
        """One deployment by its own statement, a lost race run again."""
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):  # store.retry_conflicts, on the loop
            try:
                return await self._run(params)
            except StoreConflict:
                if attempt == CONFLICT_ATTEMPTS:
                    raise
                await asyncio.sleep(conflict_pause_s(attempt))
        raise AssertionError("unreachable")

    def _end_turn(self) -> None:
        """This turn's deployments: one alone is sent at once; several are asked together
        (by ``refused``, at most :data:`TURN_MAX` a statement)."""
        turn, self._turn = self._turn, []
        groups: dict[bytes, list[tuple[list[bytes], asyncio.Future[Any]]]] = {}
        for entry in turn:
            groups.setdefault(entry[0][2], []).append(entry)
        for refused, group in groups.items():
            for start in range(0, len(group), TURN_MAX):
                chunk = group[start : start + TURN_MAX]
                try:
                    self._ask(refused, chunk)
                except Exception:  # a bug: each answered all the same, by its own statement
                    log.exception("asking %d deployments together failed", len(chunk))
                    for _, waiting in chunk:
                        _answer(waiting, _ALONE)

    def _ask(self, refused: bytes, chunk: list[tuple[list[bytes], asyncio.Future[Any]]]) -> None:
        """Send the statement that asks ``chunk`` together, written now (the turn is over),
        on the open lane with the fewest in flight; with none open (the replica starting,
        or idle long enough for the server to close them), each is sent alone, and so
        opens them."""
        lanes = [lane for lane in self.lanes if lane.conn is not None]
        lane = min(lanes, key=_INFLIGHT) if lanes and len(chunk) > 1 else None
        if lane is not None and lane.idle_and_closed():
            lane.close("the server closed it while idle")
            lane = None
        if lane is None:
            for _, waiting in chunk:
                _answer(waiting, _ALONE)
            return
        params = [refused, text_list(p[0] for p, _ in chunk), text_list(p[1] for p, _ in chunk)]
        try:
            sent = lane.send(params, TURN_STATEMENT, many=True, now=True)
        except _NotRun:
            sent = asyncio.get_running_loop().create_future()
            sent.set_exception(StoreUnavailable("the connection was lost"))
        lane.inflight += 1
        sent.add_done_callback(lambda answer: self._asked(lane, chunk, answer))

    def _asked(
        self,
        lane: Lane,
        chunk: list[tuple[list[bytes], asyncio.Future[Any]]],
        answer: asyncio.Future[Any],
    ) -> None:
        """The turn's statement answered: the settled and the unknown get their answers
        from it, the others (and all of them if it failed) are sent alone."""
        lane.inflight -= 1
        failure = StoreUnavailable("cancelled") if answer.cancelled() else answer.exception()
        rows = answer.result() if failure is None else None
        if rows is None or len(rows) != len(chunk):  # one answer each: by its own statement
            why = first_line(failure) if failure else f"{len(rows or ())} rows"
            log.info("%d deployments of a turn sent alone: %s", len(chunk), why)
            for _, waiting in chunk:
                _answer(waiting, _ALONE)
            return
        for (_, waiting), (app_id, cluster_id, status, settled) in zip(chunk, rows, strict=True):
            if app_id is None or cluster_id is None:
                _answer(waiting, None)  # unknown: what its own statement answers
            elif settled == b"t":
                _answer(waiting, (app_id, cluster_id, status))
            else:
                _answer(waiting, _ALONE)

    async def _run(self, params: list[bytes]) -> Row | None:
        """One deployment's row; sent once more, on a new connection, when it did not run."""
        for attempt in (1, 2):
            lane = min(self.lanes, key=_INFLIGHT)
            lane.inflight += 1
            try:
                if lane.conn is None:
                    await lane.connected()
                if lane.idle_and_closed():  # replaced before anything is sent on it
                    lane.close("the server closed it while idle")
                    await lane.connected()
                return await lane.send(params)  # type: ignore[no-any-return]
            except _NotRun as exc:
                if attempt == 2:
                    raise StoreUnavailable("the database ended two connections in a row") from exc
            finally:
                lane.inflight -= 1
        raise AssertionError("unreachable")

    def answered(self, lane: Lane, sent: _InFlight) -> None:
        """A deployment's transaction ended: its caller gets the row or the error."""
        if sent.future.done():  # its caller went away
            return
        if sent.error is None:
            sent.future.set_result(sent.row)
            return
        failure = store_error(sent.error, self.busy_timeout_s)
        sent.future.set_exception(failure)

    async def open(self) -> Connection:
        """A new connection with the statement prepared (blocking work, on a thread)."""
        reach = self.reach
        if reach.paused():
            raise StoreUnavailable(f"the database cannot be reached: {reach.last_error}")
        try:
            conn = await asyncio.to_thread(self._open_blocking)
        except psycopg.Error as exc:
            reach.failed(first_line(exc))
            raise StoreUnavailable(f"the database cannot be reached: {reach.last_error}") from exc
        reach.reached()
        return conn

    def _open_blocking(self) -> Connection:
        conn = self.connector.open(self.busy_timeout_s)
        try:
            for name, sql in ((STATEMENT, DEPLOY), (TURN_STATEMENT, SETTLED)):
                prepared = conn.pgconn.prepare(name, numbered(sql))
                if prepared.status != pq.ExecStatus.COMMAND_OK:
                    raise _error(prepared)
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Close every lane (on the event loop, once no deployment is in flight)."""
        for lane in self.lanes:
            lane.close("the reactor is stopping")
            opening, lane.opening = lane.opening, None
            if opening is not None and opening.done() and not _failed(opening):
                opening.result().close()  # opened for callers that went away
            elif opening is not None:
                opening.add_done_callback(_close_when_open)
