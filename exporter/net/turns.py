"""How much probe work one turn of the event loop may start: a time budget per turn.

Why: a turn of the loop runs every callback whose socket became ready, and a step of a
client's TLS handshake (its key share; then the server's certificates verified, the
keys derived, its ``Finished``) is up to a few milliseconds of CPU. In a first cycle, or
after every Secret was rotated, hundreds of first contacts answer within one turn: turns
of hundreds of milliseconds, 23 % of the probe loop's time in ``do_handshake``, and
every timer, watch event and probe deadline of the loop late by as much. The probes'
own steps and the reconnections after a cycle with timed-out clusters come in bursts
too: each slot given back wakes a probe in the next turn (64 of them, 0.5-0.9 ms each),
and a hundred reconnections start a turn.

How: one :class:`TurnBudget` per loop (the pool's), which all three draw from: each
handshake step goes through :meth:`TurnBudget.run`, a probe that got its slot (or its
credentials) and a reconnection about to start await :meth:`TurnBudget.turn`. Work
starts while this turn has run its budgeted work for less than
:attr:`TurnBudget.budget` seconds; the rest waits (a connection in its handshake stops
listening to its socket, so the loop does not spin on a readiness nobody reads; a task
awaits its turn) and goes first at the next turns, in the order it came.

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
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds of probe work (probe steps, reconnection starts, handshake steps) one turn of
#: the loop may start (:class:`TurnBudget`; the work started last may end past it).
TURN_BUDGET_S = 0.012
#: What a woken task's step is taken to cost until one was seen (a probe's: 0.5-0.9 ms).
FIRST_TASK_STEP_S = 0.0007
#: Seconds one step of a task may spend going through a long collection (:func:`sliced`).
STEP_BUDGET_S = 0.01


#: When each task last got the loop back from a slice (:func:`sliced`,
#: :func:`next_turn`), and by which clock: where its current step began, as far as a
#: slice can know.
_step_began: weakref.WeakKeyDictionary[asyncio.Task[Any], tuple[Callable[[], float], float]] = (
    weakref.WeakKeyDictionary()
)


async def next_turn() -> None:
    """Give the loop a turn, and have the next :func:`sliced` pass count from here."""
    await asyncio.sleep(0)
    task = asyncio.current_task()
    if task is not None:
        _step_began[task] = (time.perf_counter, time.perf_counter())


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

    The budget is the step's, not the pass's: a pass counts from when a slice last gave
    this task the loop back (:func:`next_turn` too), or from the first pass's start if
    none has yet; so passes one after another, and the work between them, share one
    budget. Counted from each pass's own start, the credentials' prune's five passes,
    each within its budget, and a check's bookkeeping ran 48 ms in one step under
    cProfile (bench/RESULTS.md). When the task has waited for something else since, its
    step began later than that, and the pass gives the loop a turn after its first item:
    one turn early, never late.
    """
    limit = STEP_BUDGET_S if budget is None else budget
    task = asyncio.current_task()
    since = clock()
    if task is not None:
        began = _step_began.get(task)
        if began is not None and began[0] is clock:
            since = min(since, began[1])
        _step_began[task] = (clock, since)  # the passes that follow in this step
    for item in items:
        yield item
        if clock() - since >= limit:
            await asyncio.sleep(0)
            since = clock()
            if task is not None:
                _step_began[task] = (clock, since)


class TurnBudget:
    """The probe work one turn of the event loop may start: :attr:`budget` seconds of it.

    Three kinds of work draw from it: a handshake step (:meth:`run`), and a step of a
    task (:meth:`turn`): a probe's once it has its slot or its credentials were built,
    a reconnection's start. Before,
    only the handshakes had a budget (20 ms), and a turn held besides them every probe
    step the slots given back had woken (up to the concurrency, 64) and a hundred
    reconnection starts: turns of 25-45 ms of CPU, 90-170 ms on a loaded machine. With
    this one budget no turn over 50 ms was left in a run at 20,000 Secrets with one core
    kept busy, and the lag's p99 was 47-48 ms against 59-112 ms before, the first cycle
    no longer (bench/RESULTS.md).

    What is counted is the wall time since the turn's first budgeted work began, not a
    sum of each work's own time: a task's step cannot be timed from the inside (it ends
    where it next waits), and what the budget bounds is the length of a turn, which the
    other callbacks between (answers read, deadlines) lengthen too. Whatever comes past
    the budget, or while some work waits already, waits for a later turn, first come
    first served across the three kinds; at least one waiting work runs every turn, so
    none is starved, and nothing is dropped (a waiting task that is cancelled is
    skipped).

    How a later turn runs them: a callback scheduled with ``call_soon`` (the pump) starts
    each turn while work waits. It runs the waiting handshake steps while the budget
    lasts, and wakes the waiting tasks at the head of the queue, as many as fit in the
    budget at the seconds a woken task's step was last seen to take (two at least). A
    task woken resumes in the turn after, just behind that turn's pump, which counts
    the batch against its budget at that estimate. The first of a batch goes on; the
    others go on while the turn's budget lasts (the estimate may be short), and wait
    again at the queue's head if not: those may then go one batch later than the tasks
    that came after them, the only exception to first come first served.

    Why tasks are woken rather than run by the pump: a task resumes only through a
    callback of the loop's next turn, so the pump can only decide for the turn after its
    own. Letting every waiting task look at the clock each turn instead (a loop of
    ``asyncio.sleep(0)``) would cost a step each for the hundreds of reconnections that
    can wait at once.
    """

    __slots__ = (
        "_again",
        "_armed",
        "_batch",
        "_batch_at",
        "_batch_n",
        "_clock",
        "_epoch",
        "_queue",
        "_start",
        "_step",
        "_woken",
        "budget",
        "deferred",
    )

    def __init__(
        self, budget: float = TURN_BUDGET_S, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        if budget <= 0:
            raise ValueError("the budget of a turn must be above 0 s")
        self.budget = budget
        self._clock = clock
        #: what waits, in order: handshake steps to run, and futures of tasks to wake
        self._queue: deque[Callable[[], None] | asyncio.Future[int]] = deque()
        self._start: float | None = None  #: when this turn's first budgeted work began
        self._armed = False  #: the pump is scheduled for the next turn
        self._woken = 0  #: tasks the last pump woke: they run in this turn, behind its pump
        self._step = FIRST_TASK_STEP_S  #: seconds a woken task's step was last seen to take
        self._epoch = 0  #: which pump woke a task (one batch per pump)
        self._batch = -1  #: the batch whose tasks are resuming now
        self._batch_at = 0.0  #: when its first task resumed
        self._batch_n = 0  #: how many of it have gone on
        self._again = 0  #: tasks of this turn's batch put back at the queue's head
        self.deferred = 0  #: works that waited for a later turn (tests, benchmarks)

    @property
    def waiting(self) -> int:
        """Works waiting for a later turn now."""
        return len(self._queue)

    def _left(self) -> bool:
        """Whether this turn's budget has some left; its first work starts the clock."""
        if self._start is None:
            self._start = self._clock()
            self._arm()  # the pump starts the next turn's count afresh
            return True
        return self._clock() - self._start < self.budget

    def run(self, step: Callable[[], None], park: Callable[[], None]) -> None:
        """Run the handshake ``step`` now if this turn's budget allows it and none waits
        before it; else ``park()`` now and ``step()`` at a later turn (it must then find
        out whether it still has something to do: its connection may have been closed
        meanwhile)."""
        if self._queue or not self._left():
            park()
            self._queue.append(step)
            self.deferred += 1
            self._arm()
            return
        step()

    async def turn(self) -> None:
        """Return when the calling task's step may go on: at once if this turn's budget
        allows it and none waits before it, else at a later turn. Cancelled while it
        waits, it leaves nothing behind (the pump skips its future)."""
        if not self._queue and self._left():
            return
        loop = asyncio.get_running_loop()
        again = False
        while True:
            waiter: asyncio.Future[int] = loop.create_future()
            if again:  # woken with more than the turn could hold: first at the next pump
                self._queue.insert(self._again, waiter)
                self._again += 1
            else:
                self._queue.append(waiter)
                self.deferred += 1
            self._arm()
            batch = await waiter
            now = self._clock()  # resumed: learn what one woken task's step takes
            if batch != self._batch:  # the first of its batch goes on, whatever the clock
                self._batch, self._batch_at, self._batch_n = batch, now, 1
                return
            self._step = (now - self._batch_at) / self._batch_n
            if self._start is None or now - self._start < self.budget:
                self._batch_n += 1
                return
            again = True

    def _arm(self) -> None:
        """Have the next turn start with the pump (the callbacks scheduled now run before
        the next turn's readiness callbacks)."""
        if not self._armed:
            self._armed = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._armed = False
        self._start = None
        self._again = 0
        queue = self._queue
        promised = self._woken * self._step  # the tasks woken last turn run right after
        self._woken = 0
        if not queue and not promised:
            return
        self._arm()  # first: the next pump runs before the tasks woken here
        start = self._start = self._clock()
        # Two at least: a batch of one would never show what a step takes.
        wake = max(2, int(self.budget / max(self._step, 1e-6)))
        self._epoch += 1
        progressed = False
        while queue:
            head = queue[0]
            if isinstance(head, asyncio.Future):
                if head.done():  # its task was cancelled meanwhile
                    queue.popleft()
                    continue
                if self._woken >= wake:
                    break
                queue.popleft()
                head.set_result(self._epoch)
                self._woken += 1
            elif progressed and self._clock() - start + promised >= self.budget:
                break
            else:
                queue.popleft()
                head()
            progressed = True
