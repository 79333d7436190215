"""Background work's threads: a pool of their own, apart from the threads requests use.

Why. Some of a request's work goes to a worker thread too: a large compressed webhook's
decode, a long list's encoding (``reactor.api``). Through asyncio's default executor
that work queued behind background work: when the reactor lists 20,000 Secrets and
10,000 Flux and Argo CD objects, its six informers decode and transform a page each at
once, and six is every worker that executor has on two cores (``min(32, cores + 4)``).
Background work (``fleetwatch.common.foreground.background``: a page's decode and
transforms, discovery's reads, the CD pass, a scrape's rendering) now runs on
:class:`BackgroundPool`'s threads when a process installed one (``fleetwatch reactor``
does), and the default executor is left to requests.

Not done: the pool's threads at the kernel's idle scheduling class (``SCHED_IDLE``),
preempted the moment a request's thread wakes. Quiet, it cut the reactor's p99 through
its lists by a fifth; with two busy processes beside it, a thread of that class holding
the interpreter waited behind them, and every request with it: p99 63-192 ms against 20-38
ms, in a CPU cgroup of the reactor's own or not (bench/RESULTS.md, the idle class).

:func:`in_background` runs ``fn(*args)`` as background work on the installed pool, or on
asyncio's default executor when none is installed (the exporter, a test's app).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from fleetwatch.common.foreground import background, mark_background

T = TypeVar("T")
P = ParamSpec("P")

_installed: BackgroundPool | None = None


class BackgroundPool:
    """The threads background work runs on (named ``fleetwatch-background_N``)."""

    def __init__(self, workers: int | None = None) -> None:
        self.executor = ThreadPoolExecutor(
            max_workers=workers or min(32, (os.cpu_count() or 1) + 4),
            thread_name_prefix="fleetwatch-background",
            initializer=mark_background,
        )

    def shutdown(self) -> None:
        """No new work; what runs finishes (the interpreter waits for it at exit)."""
        self.executor.shutdown(wait=False, cancel_futures=True)


def install(pool: BackgroundPool | None) -> BackgroundPool | None:
    """Make ``pool`` the process's (None: back to asyncio's default executor); the one
    installed before."""
    global _installed
    before, _installed = _installed, pool
    return before


async def in_background(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args)`` as background work in a worker thread (module docstring); the
    caller's context variables go with it, as with ``asyncio.to_thread``."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    work = functools.partial(context.run, background(fn), *args, **kwargs)
    pool = _installed
    return await loop.run_in_executor(pool.executor if pool is not None else None, work)
