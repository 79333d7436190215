"""The garbage collector's policy for a long-lived process: freeze what each cycle leaves.

The exporter's cycle is its probe cycle; the reactor has none, so it calls
:meth:`CollectorPolicy.cycle_ended` every minute (``reactor.collector``): at 20,000
clusters from Secrets and 10,000 Flux and Argo CD objects its automatic full collections
took 130-360 ms each, every few seconds while it listed them and every 5-6 s after, each a
pause of every call it served (bench/reactor_lists.py).

Why. At fleet scale the exporter holds hundreds of thousands of long-lived objects
(connections, TLS objects, credentials, discovery's contexts, every cluster's state), and
every cycle allocates and keeps a few more per cluster (its new state, its results).
CPython's full collection walks every tracked object, and the new survivors of each
cycle trigger one about every cycle: at 2,000 stand-in clusters a full collection took
0.3-0.5 s nearly every cycle (bench/probe_cycle.py records them), on the event loop's
thread or the rendering thread, for garbage that reference counting had already freed.

The policy. When a cycle ends, :func:`gc.freeze` moves every surviving object into the
permanent generation: the collections of the next cycle look only at what that cycle
allocates. Frozen objects are still freed by reference counting the moment they are no
longer used (a cluster's old state, a closed connection); only garbage *cycles* among
them would wait for the collector. So every ``full_every`` cycles the policy first
unfreezes everything and runs one full collection: such garbage waits at most that many
cycles, and that collection is the only one that walks the whole heap.

The young generations are collected as CPython does (they catch the short-lived cycles:
an exception and its traceback), but no *automatic* full collection runs
(:meth:`CollectorPolicy.install`): with the heap frozen, CPython's rule for one ("the old
generation grew by a quarter") holds almost at once, and at 10,000 clusters it ran three
a cycle, each walking the cycle's tasks and states (0.24-0.30 s per cycle, against
0.7-0.9 s without the policy; bench/RESULTS.md). Garbage cycles that reach the
old generation wait for the policy's full collection, as frozen ones do.

The process installs it (``exporter.cli``, ``reactor.collector``); a test or a library
user of the Monitor that does not gets CPython's defaults.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)

#: Cycles between two full collections of everything (at the default 300 s interval,
#: every 50 minutes; at a 10 s interval, every 100 s).
FULL_EVERY = 10
#: The old generation's threshold once installed: never reached, so never automatic.
_NEVER = 2**30


class CollectorPolicy:
    """Call :meth:`cycle_ended` when a probe cycle has ended (its results published)."""

    def __init__(self, full_every: int = FULL_EVERY) -> None:
        if full_every < 1:
            raise ValueError("full_every must be at least 1")
        self.full_every = full_every
        self.cycles = 0
        self.last_full_seconds = 0.0  #: how long the last full collection took

    def install(self) -> None:
        """Turn off automatic full collections (the young ones stay): the policy runs them."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, _NEVER)

    def cycle_ended(self) -> None:
        self.cycles += 1
        if self.cycles % self.full_every == 0:
            started = time.perf_counter()
            gc.unfreeze()
            found = gc.collect()
            self.last_full_seconds = time.perf_counter() - started
            log.debug(
                "full garbage collection after %d cycles: %d unreachable objects, %.3fs",
                self.full_every,
                found,
                self.last_full_seconds,
            )
        gc.freeze()
