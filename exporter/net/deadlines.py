"""Request deadlines in loop time: one heap for every request in flight, one loop timer.

``HttpPool.get(..., deadline=)`` (``exporter.net.pool``) bounds a request as an
``asyncio.timeout`` around it would, for a fraction of its CPU: the loop's timers are a
heap of ``TimerHandle`` objects compared in Python, this one a heap of tuples compared
in C (``bench/connections.py`` measures both). When a deadline passes, the connection
future the request awaits fails with ``TimeoutError``, or, when it awaits something
else, its task is cancelled and the pool turns that into ``TimeoutError``.

At most :data:`EXPIRE_SLICE` requests expire in one turn of the loop, the rest at the next
turns: each one expired is a step of its task in the next turn (its ``TimeoutError``
handled, its result recorded), and the 1,000 hung clusters of a 20,000-cluster fleet
reach their timeout together, 1,000 steps and 100-190 ms in one turn otherwise
(bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import heapq

#: Requests expired in one turn of the loop at most (the rest at the next turns).
EXPIRE_SLICE = 100


class Request:
    """The deadline of one request of the pool (``get`` or ``preconnect``) under way.

    When it passes, the connection future the request awaits fails with ``TimeoutError``
    (no cancellation needed); any other wait (the gate, ``getaddrinfo``, the TCP connect)
    is cancelled, and the pool turns that cancellation into ``TimeoutError`` unless the
    caller cancelled too (:meth:`timed_out`), as ``asyncio.timeout`` does.
    """

    __slots__ = ("base", "cancelled", "done", "future", "task")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.future: asyncio.Future[None] | None = None  #: the connection future awaited
        self.done = False  #: the request ended (its entry in the heap is dead)
        self.cancelled = False  #: the deadline cancelled the task
        #: the task's ``cancelling()`` when the request started: a cancellation by the
        #: caller since then (its own timeout) is the caller's, deadline or not
        self.base = task.cancelling()

    def __lt__(self, other: Request) -> bool:  # equal deadlines in the heap: any order
        return id(self) < id(other)

    def expire(self) -> None:
        future = self.future
        if future is not None and not future.done():
            future.set_exception(TimeoutError())
        else:
            self.cancelled = True
            self.task.cancel()

    def timed_out(self) -> bool:
        """After a ``CancelledError``: was it the deadline's, and the deadline's only?"""
        return self.cancelled and self.task.uncancel() <= self.base


class Deadlines:
    """Every request's deadline in one heap, under one loop timer for the earliest.

    A request that ends leaves a dead entry; entries are dropped from the top as requests
    end, and the heap is rebuilt when dead ones outnumber the live (a hung request at the
    top would keep them all otherwise).
    """

    __slots__ = ("_at", "_heap", "_live", "_loop", "_timer")

    def __init__(self) -> None:
        self._heap: list[tuple[float, Request]] = []
        self._live = 0  #: requests started and not ended
        self._timer: asyncio.Handle | None = None
        self._at = float("inf")  #: when the timer fires
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, deadline: float) -> Request:
        task = asyncio.current_task()
        assert task is not None, "a request runs in a task"
        req = Request(task)
        heapq.heappush(self._heap, (deadline, req))
        self._live += 1
        if deadline < self._at:
            if self._timer is not None:
                self._timer.cancel()
            loop = self._loop = asyncio.get_running_loop()
            self._timer = loop.call_at(deadline, self._fire)
            self._at = deadline
        return req

    def end(self, req: Request) -> None:
        req.done = True
        self._live -= 1
        heap = self._heap
        while heap and heap[0][1].done:
            heapq.heappop(heap)
        if len(heap) > 2 * self._live + 64:
            self._heap = [entry for entry in heap if not entry[1].done]
            heapq.heapify(self._heap)

    def _fire(self) -> None:
        assert self._loop is not None
        # The loop runs a timer up to its clock resolution early: expire up to the time
        # it was set for, at least.
        now = max(self._loop.time(), self._at)
        self._timer = None
        self._at = float("inf")
        heap = self._heap
        expired = 0
        while heap and heap[0][0] <= now and expired < EXPIRE_SLICE:
            _, req = heapq.heappop(heap)
            if not req.done:
                req.expire()
                expired += 1
        while heap and heap[0][1].done:
            heapq.heappop(heap)
        if heap:
            self._at = heap[0][0]
            if self._at <= now:  # due already: the next slice at the next turn
                self._timer = self._loop.call_soon(self._fire)
            else:
                self._timer = self._loop.call_at(self._at, self._fire)


async def wait(future: asyncio.Future[None], req: Request | None) -> None:
    """Await a connection's future under the request's deadline."""
    if req is None:
        await future
        return
    req.future = future
    try:
        await future
    finally:
        req.future = None
