"""The fence: every CD write is checked again at the last moment before it leaves.

The actuator decides a pass's writes at once and sends them several at a time; between a
decision and its request lie waits that can stall for any length of time (the
concurrency limit, the connection taken from the pool or opened, a process paused by
the machine or a debugger). What was true at the decision may not be by then: this
replica's Lease may have lapsed and another replica may act, or the outage a pause was
decided for may have closed (the recovery reached another replica). So each write
carries a guard (``reactor.cd.kubewrite.Guard``), which the client awaits as it writes
the request's body, after every wait; it answers two questions, each a pure rule:

1. **Does this replica still hold the Lease, long enough?** (``reactor.cd.lease.may_write``)
   From the clock alone: the request, given its whole timeout, must end a margin before
   the Lease may pass to another replica. Asked first (a replica that lost the Lease
   reads nothing more of the store) and, for a pause, again after the store's read: the
   last check before the socket write, with nothing awaited between the two.
2. **Is the pause still wanted?** (``reactor.cd.rules.still_wanted``) A PAUSE or REMARK
   is sent only while its outage is open in the store. The open outages are read once
   and shared by the batch's writes while the read is younger than :data:`FRESH_S`; a
   write that waited longer (it stalled) reads them again, so the answer a write goes by
   was read after its last wait.

A refused write raises ``Fenced`` (its reason: ``outage_closed`` or ``lease``); the
actuator counts it, logs once per pass and reason, and leaves the action pending: the
next replica that acts (or this one's next pass) decides again from how things are.

I/O only to read the store; the decisions are the two rules.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable

from reactor.cd.kubewrite import Fenced, Guard
from reactor.cd.ports import Leadership
from reactor.cd.rules import NEEDS_OPEN_OUTAGE, Decision, still_wanted

log = logging.getLogger(__name__)

#: How old the batch's read of the open outages may be when a write goes by it: a wait
#: longer than this (a stall) means a new read. A pass's reads then cost one query per
#: this long at most (10 per second), whatever the number of writes.
FRESH_S = 0.1


class OpenOutages:
    """The store's open outages, read again when the last read is older than ``fresh_s``.

    Concurrent writes that find it stale wait for one read, not one each. The age counts
    from the moment the read began (the store answers as of some moment after it)."""

    def __init__(
        self,
        read: Callable[[], Awaitable[frozenset[int]]],
        clock: Callable[[], float] = time.monotonic,
        fresh_s: float = FRESH_S,
    ) -> None:
        self._read = read
        self._clock = clock
        self._fresh_s = fresh_s
        self._value: frozenset[int] = frozenset()
        self._read_at: float | None = None
        self._lock = asyncio.Lock()
        #: how many reads were made (tests, the bench)
        self.reads = 0

    def _fresh(self) -> bool:
        return self._read_at is not None and self._clock() - self._read_at <= self._fresh_s

    async def get(self) -> frozenset[int]:
        if self._fresh():
            return self._value
        async with self._lock:
            if not self._fresh():
                started = self._clock()
                self._value = await self._read()
                self._read_at = started
                self.reads += 1
        return self._value


class Fence:
    """The guards of one batch of writes (module docstring). ``timeout``: the longest a
    write may take, which the Lease's rule counts on (the caller sends it with it)."""

    def __init__(self, leader: Leadership | None, outages: OpenOutages, timeout: float) -> None:
        self.leader = leader
        self.outages = outages
        self.timeout = timeout
        #: reason -> writes refused, and what the first refusal said (the pass's log line)
        self.refused: Counter[str] = Counter()
        self.why: dict[str, str] = {}

    @classmethod
    def of(cls, leader: Leadership | None, outages: OpenOutages, request_timeout_s: float) -> Fence:
        """The fence of a batch: its writes wait at most ``request_timeout_s``, and no
        longer than the elected replica's own requests (``reactor.cd.lease``: a third of
        the renew deadline), so that they fit in the Lease."""
        if leader is not None:
            request_timeout_s = min(request_timeout_s, leader.request_timeout_s)
        return cls(leader, outages, request_timeout_s)

    def log_refused(self) -> None:
        """One line per reason for the batch, at INFO: a fence at work is expected (a
        hand-over, a recovery during a pause), not a fault."""
        for reason, count in sorted(self.refused.items()):
            log.info(
                "cd: %d patch(es) not sent: %s; left pending for the replica that acts",
                count,
                self.why[reason],
            )

    def guard(self, decision: Decision) -> Guard:
        """The last-moment check of a write carrying out ``decision``."""

        async def check() -> None:
            self._check_lease()  # a replica that lost the Lease does not read the store
            if decision.verb in NEEDS_OPEN_OUTAGE:
                open_outages = await self.outages.get()
                if not still_wanted(decision, open_outages):
                    self._refuse("outage_closed", f"outage {decision.mark} closed meanwhile")
                self._check_lease()  # again after the read: nothing is awaited after this

        return check

    def lease_guard(self) -> Guard:
        """The last-moment check of a write that records what was done (an Event): the
        Lease alone, as every write of this replica (``reactor.cd.events``)."""

        async def check() -> None:
            self._check_lease()

        return check

    def _check_lease(self) -> None:
        if self.leader is not None and not self.leader.may_write(self.timeout):
            ago = self.leader.renewed_ago()
            since = "never renewed" if ago is None else f"last renewed {ago:.2f} s ago"
            self._refuse("lease", f"this replica's Lease may have expired ({since})")

    def _refuse(self, reason: str, why: str) -> None:
        self.refused[reason] += 1
        self.why.setdefault(reason, why)
        raise Fenced(reason, why)
