"""The PostgreSQL store's connections: how one is opened, and how a dead one is told apart.

Each handle of ``reactor.store.postgres`` owns one connection, used by one store thread.
Under a light load most of a replica's connections sit idle (``--db.writers`` of them and
one for reads), and PostgreSQL may close an idle one at any time: a restart, a failover,
``pg_terminate_backend``, ``idle_session_timeout``. The server then sends a last error
("terminating connection due to administrator command") and closes the socket; the client
learns it only when it next uses the connection. A call that met such a connection used
to answer 503 while the database answered again, once per connection that had died.

So before a handle sends anything on a connection it asks the socket, without waiting
(:func:`closed_by_server`): an idle connection is sent nothing unasked (the reactor
neither listens for notifications nor leaves a query in flight), so a socket that has
something to read, or an error, holds the server's goodbye. Such a connection is replaced
before use, and nothing was sent on it. What that check cannot see (a server that dies
between the check and the send) is a failure during the call: retried only where nothing
of it can have reached the server (``reactor.store.postgres``), a 503 otherwise.

While the database cannot be reached, a handle fails at once for ``RECONNECT_PAUSE_S``
after each failed attempt instead of each call waiting for a connect timeout, so a queue
of calls drains as 503s. The pause is shared by the handles of one store
(:class:`Reachability`): the first handle that connects again ends it for all, so no
handle keeps failing at once after its replica has reached the database again.

The password may come from a file that rotates (``--db.password-file``,
``reactor.secretfile``): each connection is opened with the file's password of the
moment, and a connection refused (a password changed with ``ALTER ROLE``, among other
reasons) re-reads the file and, when that gives another password, is tried again at once.
Open connections are not affected by a rotation: PostgreSQL checks a password only when a
connection starts.
"""

from __future__ import annotations

import math
import select
import time
from typing import Any

import psycopg

from reactor.secretfile import SecretFile

#: After a failed connection attempt, calls fail at once for this long.
RECONNECT_PAUSE_S = 0.5
#: A transaction left idle this long (its replica frozen or cut off) is ended by the
#: server, which releases its cluster locks; ours never wait between statements.
IDLE_IN_TRANSACTION_TIMEOUT_S = 30

Connection = psycopg.Connection[tuple[Any, ...]]


class Reachability:
    """Whether the database could be reached, shared by the handles of one store.

    Plain attribute writes from several store threads: each is atomic, and a lost update
    costs at most one more connection attempt or one more pause.
    """

    def __init__(self) -> None:
        self.retry_at = 0.0  #: monotonic time before which no handle tries to connect
        self.last_error = ""  #: why the last attempt failed (for the log, never an answer)

    def paused(self) -> bool:
        return time.monotonic() < self.retry_at

    def failed(self, reason: str) -> None:
        self.last_error = reason
        self.retry_at = time.monotonic() + RECONNECT_PAUSE_S

    def reached(self) -> None:
        self.retry_at = 0.0


class Connector:
    """Opens connections to one database.

    ``conninfo``: a ``postgresql://`` URL or libpq key=value string, without the password;
    ``password``: given apart, so it is never part of a string that could be logged; a
    :class:`SecretFile` is read again as it changes.
    """

    def __init__(
        self,
        conninfo: str,
        password: str | SecretFile | None,
        connect_timeout_s: float,
    ) -> None:
        self.conninfo = conninfo
        self.password = password
        self.connect_timeout_s = connect_timeout_s

    def open(self, lock_timeout_s: float) -> Connection:
        """A new connection, with the password of the moment; refused, with the password
        file's new one if it has changed (:class:`SecretFile`)."""
        source = self.password
        if not isinstance(source, SecretFile):
            return self._connect(lock_timeout_s, source)
        used = source.current()
        try:
            return self._connect(lock_timeout_s, used)
        except psycopg.OperationalError:
            fresh = source.reread()  # another handle may have read it already: compare
            if fresh == used:
                raise
        return self._connect(lock_timeout_s, fresh)

    def _connect(self, lock_timeout_s: float, password: str | None) -> Connection:
        options = (
            f"-c lock_timeout={int(lock_timeout_s * 1000)} "
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_S * 1000}"
        )
        return psycopg.connect(
            self.conninfo,
            password=password,
            autocommit=True,  # transactions are explicit (conn.transaction())
            connect_timeout=max(1, math.ceil(self.connect_timeout_s)),
            application_name="fleetwatch-reactor",
            options=options,
            # A server that vanishes (host down, network cut) is noticed in ~25 s
            # instead of the system's two hours.
            keepalives=1,
            keepalives_idle=10,
            keepalives_interval=5,
            keepalives_count=3,
        )


def closed_by_server(conn: Connection) -> bool:
    """Whether the server has closed (or said it is closing) this idle connection.

    Call it only between two calls, when the connection is idle: then nothing is due from
    the server, and anything to read (its last error, the end of the stream) or an error
    on the socket means the connection is over. One ``poll`` that does not wait: about a
    microsecond.
    """
    if conn.closed or conn.broken:
        return True
    try:
        fd = conn.fileno()
    except psycopg.Error:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)  # errors and hang-ups come anyway
    return bool(poller.poll(0))


def first_line(exc: BaseException) -> str:
    """The first line of a driver error (for the log)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
