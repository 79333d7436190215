"""How much TLS handshake work one turn of the event loop may do: a time budget per turn.

Why: a turn of the loop runs every callback whose socket became ready, and a step of a
client's TLS handshake (its key share; then the server's certificates verified, the
keys derived, its ``Finished``) is up to a few milliseconds of CPU. In a first cycle, or
after every Secret was rotated, hundreds of first contacts answer within one turn: turns
of hundreds of milliseconds, 23 % of the probe loop's time in ``do_handshake``, and
every timer, watch event and probe deadline of the loop late by as much.

How: each handshake step goes through :meth:`HandshakeTurns.run`. Steps run while the
steps of this turn have taken less than :attr:`HandshakeTurns.budget` seconds; the next
ones are parked (their connection stops listening to its socket, so the loop does not
spin on a readiness nobody reads) and run first at the next turns, in the order they
came.

A time budget rather than a count: a step's cost varies with the machine, its load and
the certificate, and what the bound is for is the length of a turn. The wall clock, not
the loop thread's CPU time (``time.thread_time``): a step also waits for the
interpreter's lock and for a core, and a turn lasts those waits too; counting CPU only,
the lag's p99 at 5,000 Secrets was 0.20-0.26 s instead of 0.05-0.09 s. Rather than
slots for connections in their handshake: a slot is held while the server thinks, and an
API server that accepts TCP and never answers would hold one until its probe stalls;
and N handshakes in flight may still all answer within one turn. The budget costs
nothing without contention; under it, a first cycle at 5,000 Secrets was no longer, one
at 10,000 about 1.3 times as long on a loaded machine (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

#: Seconds of handshake steps one turn of the loop may run (one step more at most).
HANDSHAKE_BUDGET_S = 0.02
#: Seconds one step of a task may spend going through a long collection (:func:`sliced`).
STEP_BUDGET_S = 0.01


async def sliced(
    items: Iterable[T], budget: float | None = None, clock: Callable[[], float] = time.perf_counter
) -> AsyncIterator[T]:
    """``items``, the loop given a turn whenever this task's step has run ``budget`` s
    (default :data:`STEP_BUDGET_S`, read at the call).

    Why: the cycle's own bookkeeping goes through every cluster several times (the scan
    followed in the table, the targets, what the cycle leaves to forget), each pass tens
    of milliseconds of CPU at 20,000 clusters and two to three times as long on the wall
    on a loaded machine; one turn of 100-225 ms at each cycle's start and end was most of
    the probe loop's lag over 100 ms there (bench/RESULTS.md). A time budget,
    not a count: what one item costs varies with the pass and the machine. The body of
    the consumer's loop counts (its time is between two reads of the clock). Whatever
    ``items`` iterates must not change meanwhile: pass a copy of a dict the loop's other
    tasks write (``list(d)``).
    """
    limit = STEP_BUDGET_S if budget is None else budget
    since = clock()
    for item in items:
        yield item
        if clock() - since >= limit:
            await asyncio.sleep(0)
            since = clock()


class HandshakeTurns:
    """The handshake steps of one event loop, at most :attr:`budget` seconds a turn."""

    __slots__ = ("_armed", "_clock", "_queue", "_spent", "budget", "deferred")

    def __init__(
        self, budget: float = HANDSHAKE_BUDGET_S, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        if budget <= 0:
            raise ValueError("the handshake budget of a turn must be above 0 s")
        self.budget = budget
        self._clock = clock
        self._queue: deque[Callable[[], None]] = deque()
        self._spent = 0.0  #: seconds of steps in this turn so far
        self._armed = False  #: the next turn's start is scheduled
        self.deferred = 0  #: steps that were parked for a later turn (tests, benchmarks)

    @property
    def waiting(self) -> int:
        """Steps parked now."""
        return len(self._queue)

    def run(self, step: Callable[[], None], park: Callable[[], None]) -> None:
        """Run ``step`` now if this turn's budget allows it and none waits before it; else
        ``park()`` now and ``step()`` at a later turn (it must then find out whether it
        still has something to do: its connection may have been closed meanwhile)."""
        if self._queue or self._spent >= self.budget:
            park()
            self._queue.append(step)
            self.deferred += 1
            self._arm()
            return
        self._run(step)

    def _run(self, step: Callable[[], None]) -> None:
        started = self._clock()
        try:
            step()
        finally:
            self._spent += self._clock() - started
            self._arm()

    def _arm(self) -> None:
        """Have the next turn start with :meth:`_next_turn` (the callbacks scheduled now
        run before the next turn's readiness callbacks)."""
        if not self._armed:
            self._armed = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._armed = False
        self._spent = 0.0
        queue = self._queue
        while queue and self._spent < self.budget:
            self._run(queue.popleft())
        if queue:
            self._arm()
