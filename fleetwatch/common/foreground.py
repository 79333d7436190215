"""Background work in worker threads gives way while requests are being answered.

Why: CPython runs one thread at a time. A worker thread that reads 20,000 Secrets or reads
10,000 CD objects keeps the interpreter for a switch interval (CPython's 5 ms) at a time;
a request's store transaction gives the interpreter up at every SQLite call and, with such
a thread running, waits up to that interval to get it back at each one. A webhook of a
dozen statements then takes tens of milliseconds instead of one, and the store's one
writer thread, which answers the requests one after the other, falls behind: measured on
the reactor through its first list of 20,000 Secrets and 10,000 objects
(bench/reactor_lists, bench/RESULTS.md), requests waited 100-400 ms for the writer and the
slowest answers took 0.5-1.5 s, while the event loop itself was never more than 50 ms
late. No thread priority exists in CPython, so the background work yields by itself.

How: a server counts the requests it is answering in :data:`FOREGROUND` (the reactor's
``reactor.api.handlers.foreground_middleware``, on the event loop). Background loops in
worker threads take their items through :func:`paced`, which, after every :data:`SLICE_S`
of work, calls :func:`give_way`: while a request is being answered it sleeps (a sleep gives
the interpreter up) in steps of :data:`STEP_S`, for at most :data:`MAX_WAIT_S`, so
background work still advances under a steady load and a request does not wait for it.
Idle, it costs one clock read per item. The price: while requests never stop, background
work runs at a sixth of its speed at worst (2 ms of work per 10 ms asleep); at the
benchmark's 100 requests a second, busy a quarter of the time, about a third slower. The
CD pass of an outage is background work too: it pauses Flux and Argo CD objects, whose
own intervals are minutes, a second or two later at worst; a webhook that a pass holds up
delays every alert behind it.

:func:`paced` changes when a loop runs, never what it yields: the pure modules' loops over
a fleet (discovery's merge, the CD mirror's plan, index, rules and books) take their items
through it, and stay pure in what they answer.

Only background work gives way: a function run through :func:`background` (what
``fleetwatch.common.backgroundpool.in_background`` runs in a worker thread: the reactor's
discovery and CD pass, a list page's decode, a scrape's rendering, which is why a scrape
is not counted as a request) or a thread that called :func:`mark_background` (the
reactor's store thread for the CD's reads). The same loop run for a request (a thread of
the request's own, a store thread answering it) never sleeps, nor does an event loop's
thread: the request would wait for itself. The count is one process-wide
:class:`Foreground` (as prometheus_client's default registry is one), read from other
threads without a lock (an int read is atomic in CPython; a stale read costs one slice).

The count starts when a request reaches the handlers: its connection accepted, its bytes
read and parsed before that, on the event loop, while background threads run unchecked;
and each time the loop or a store thread gives the interpreter up (a socket call, a
statement) it waits for the thread holding it to reach the switch interval. So the
reactor's process runs with a switch interval of :data:`SWITCH_INTERVAL_S` instead of
CPython's 5 ms (:func:`favour_requests`): a waiting thread gets the interpreter after a
quarter of a millisecond of another's work. Measured through the first list of 20,000
Secrets and 10,000 objects at 100 requests a second (bench/reactor_lists, bench/RESULTS.md),
each against the other in the same sitting: p99 28-44 ms at 5 ms, 12-17 ms at 1 ms; later,
13-21 ms at 1 ms, 7-11 ms at 0.25 ms; the first list's CPU the same at each, and the
throughput of ``POST /deployments`` too (0.65-0.66x the bare handler at the medians).
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

#: Seconds of background work between two checks of the foreground.
SLICE_S = 0.002
#: Seconds of one sleep while a request is being answered.
STEP_S = 0.0005
#: At most this long a background loop waits at one check, then works a slice again.
MAX_WAIT_S = 0.010
#: The interpreter's switch interval, in seconds, in a process that answers requests beside
#: background threads (CPython's default: 0.005).
SWITCH_INTERVAL_S = 0.00025


class Foreground:
    """The requests a server of this process is answering now."""

    __slots__ = ("inflight", "waited_s")

    def __init__(self) -> None:
        self.inflight = 0
        #: seconds background loops have slept for requests (tests and benchmarks read it)
        self.waited_s = 0.0

    @property
    def busy(self) -> bool:
        return self.inflight > 0


FOREGROUND = Foreground()

#: ``background``: this thread runs background work now
_here = threading.local()


def background(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn``, run as background work: its paced loops give way to requests."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        was = getattr(_here, "background", False)
        _here.background = True
        try:
            return fn(*args, **kwargs)
        finally:
            _here.background = was

    return run


def mark_background() -> None:
    """This thread runs background work only, from now on."""
    _here.background = True


def background_here() -> bool:
    """This thread runs background work now."""
    return bool(getattr(_here, "background", False))


def give_way(foreground: Foreground = FOREGROUND) -> None:
    """In background work: sleep while a request is being answered, at most
    :data:`MAX_WAIT_S`. Anywhere else: nothing."""
    if not foreground.busy or not background_here():
        return
    started = time.monotonic()
    deadline = started + MAX_WAIT_S
    while foreground.busy and time.monotonic() < deadline:
        time.sleep(STEP_S)
    foreground.waited_s += time.monotonic() - started


class Paced(list[T]):
    """A list whose iteration is :func:`paced`: for a loop that is not ours, e.g.
    prometheus_client formatting the samples of a family of thousands."""

    def __iter__(self) -> Iterator[T]:
        return paced(list.__iter__(self))


class Slices:
    """:func:`give_way` after every :data:`SLICE_S` of work, for a loop that calls
    :meth:`tick` once per item (:func:`paced` is it for an iterable)."""

    __slots__ = ("_due", "foreground")

    def __init__(self, foreground: Foreground = FOREGROUND) -> None:
        self.foreground = foreground
        self._due = time.monotonic() + SLICE_S

    def tick(self) -> None:
        if time.monotonic() >= self._due:
            give_way(self.foreground)
            self._due = time.monotonic() + SLICE_S


def paced(items: Iterable[T], foreground: Foreground = FOREGROUND) -> Iterator[T]:
    """``items``, with :func:`give_way` after every :data:`SLICE_S` of the caller's work."""
    slices = Slices(foreground)
    for item in items:
        yield item
        slices.tick()


def favour_requests() -> None:
    """Process-wide: a thread waiting for the interpreter gets it after
    :data:`SWITCH_INTERVAL_S` of another thread's work (module docstring). A command calls
    it before it serves; a test's app keeps CPython's default."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
