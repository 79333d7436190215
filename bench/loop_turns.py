"""A timer of every turn of one event loop, and of every callback a long turn ran: what
makes the exporter's probe loop late (issue 34; bench/RESULTS.md, rounds 11 and 16).

Why a benchmark helper and not product code: it patches ``asyncio``'s private
``BaseEventLoop._run_once`` and ``events.Handle._run`` (every callback of every loop of the
process pays a clock read or two), which nothing shipped should do. The exporter runs
under it as ``python -m bench.loop_turns --out FILE -- exporter ARGS...`` (what
``bench.scrape_at_scale --turns FILE`` does); only the loop of the thread named
``--thread`` (the probe side's, ``exporter.loopthread``) is timed.

A turn's *busy* time is ``_run_once`` minus its wait in the selector: the time a callback
that became ready at the turn's start waits at most, what the lag timer
(``exporter.looplag``) samples. Per turn also its CPU time in the thread
(``time.thread_time``: the rest is the wait for the interpreter's lock and for a core)
and the garbage collections that ran meanwhile (in any thread: they hold the lock).
Callbacks are named by what they run: a task's step by the task's name without its
digits and its coroutine's name, a readiness callback by its bound method.

Written every 5 s and at exit (JSON): the turns' busy-time quantiles, how many passed
50 and 100 ms, per second since the start the worst turn, and for the turns over
``--long`` seconds, the callbacks' time summed by name, and the longest 40 turns with
their 8 longest callbacks each.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import cProfile
import functools
import gc
import io
import json
import pstats
import re
import selectors
import sys
import threading
import time
from asyncio import base_events, events
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

_DIGITS = re.compile(r"\d+")


def _name(handle: events.Handle) -> str:
    callback = getattr(handle, "_callback", None)
    while isinstance(callback, functools.partial):
        callback = callback.func
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        qual = getattr(coro, "__qualname__", type(coro).__name__)
        return f"task {_DIGITS.sub('N', owner.get_name())}: {qual}"
    if isinstance(owner, asyncio.Future):
        return f"future {type(owner).__name__}"
    return getattr(callback, "__qualname__", repr(callback))


class TurnTimer:
    """The timings of one thread's loop (installed once per process)."""

    def __init__(self, thread: str, long: float, profile: str = "") -> None:
        self.thread = thread
        self.long = long
        #: callbacks whose name matches this run under one ``cProfile`` (their costs by
        #: function, summed: what a long step of the cycle's own task does)
        self.profile = re.compile(profile) if profile else None
        self.profiled_stats: pstats.Stats | None = None
        #: each profiled step that ran ``long`` seconds or more: its own functions (what
        #: one long step did, which the summed profile cannot tell apart)
        self.long_steps: list[dict[str, Any]] = []
        self.t0 = time.perf_counter()
        self.busy: list[float] = []
        self.worst_per_second: dict[int, float] = {}
        self.long_by_name: defaultdict[str, float] = defaultdict(float)
        self.long_calls: Counter[str] = Counter()
        self.longest: list[dict[str, Any]] = []
        self.gc_seconds = 0.0
        self.gc_by_generation: dict[int, list[float]] = defaultdict(list)
        self._in_turn = False
        self._calls: list[tuple[float, str]] = []
        self._select = 0.0
        self._gc_in_turn = 0.0
        self._gc_start = 0.0
        #: seconds the selector returned later than its timeout asked, when nothing was
        #: ready: the wait for the interpreter's lock or a core once woken, which no
        #: turn's busy time shows but the lag timer does
        self.woke_late: list[float] = []

    def install(self) -> None:
        timer = self
        run_once = base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]
        handle_run = events.Handle._run
        select = selectors.EpollSelector.select

        def timed_run_once(loop: base_events.BaseEventLoop) -> None:
            if threading.current_thread().name != timer.thread:
                run_once(loop)
                return
            timer._calls = []
            timer._select = 0.0
            timer._gc_in_turn = 0.0
            timer._in_turn = True
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                run_once(loop)
            finally:
                timer._in_turn = False
                timer._end_turn(wall, cpu)

        def timed_handle_run(handle: events.Handle) -> None:
            if not timer._in_turn or threading.current_thread().name != timer.thread:
                handle_run(handle)
                return
            name = _name(handle)
            profiled = timer.profile is not None and timer.profile.search(name)
            started = time.perf_counter()
            try:
                if profiled:
                    step = cProfile.Profile()
                    step.runcall(handle_run, handle)
                    timer.keep_step(step, time.perf_counter() - started)
                else:
                    handle_run(handle)
            finally:
                timer._calls.append((time.perf_counter() - started, name))

        def timed_select(selector: selectors.EpollSelector, timeout: float | None = None) -> Any:
            if not timer._in_turn:
                return select(selector, timeout)
            started = time.perf_counter()
            ready = []
            try:
                ready = select(selector, timeout)
                return ready
            finally:
                now = time.perf_counter()
                timer._select += now - started
                if timeout is not None and timeout > 0 and not ready:
                    timer.woke_late.append(max(0.0, now - started - timeout))

        base_events.BaseEventLoop._run_once = timed_run_once  # type: ignore[attr-defined]
        events.Handle._run = timed_handle_run  # type: ignore[method-assign,assignment]
        selectors.EpollSelector.select = timed_select  # type: ignore[method-assign,assignment]
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            return
        spent = time.perf_counter() - self._gc_start
        self.gc_seconds += spent
        self.gc_by_generation[info.get("generation", -1)].append(spent)
        if self._in_turn:
            self._gc_in_turn += spent

    def _end_turn(self, wall: float, cpu: float) -> None:
        now = time.perf_counter()
        busy = now - wall - self._select
        self.busy.append(busy)
        second = int(now - self.t0)
        if busy > self.worst_per_second.get(second, 0.0):
            self.worst_per_second[second] = busy
        if busy < self.long:
            return
        for spent, name in self._calls:
            self.long_by_name[name] += spent
            self.long_calls[name] += 1
        top = sorted(self._calls, reverse=True)[:8]
        kinds = Counter(name for _, name in self._calls)
        entry = {
            "at_s": round(now - self.t0, 2),
            "busy_ms": round(busy * 1000, 1),
            "cpu_ms": round((time.thread_time() - cpu) * 1000, 1),
            "gc_ms": round(self._gc_in_turn * 1000, 1),
            "callbacks": len(self._calls),
            "callbacks_ms": round(sum(s for s, _ in self._calls) * 1000, 1),
            "top": [[round(s * 1000, 2), n] for s, n in top],
            "kinds": kinds.most_common(6),
        }
        self.longest.append(entry)
        self.longest.sort(key=lambda e: -e["busy_ms"])
        del self.longest[40:]

    def keep_step(self, step: cProfile.Profile, spent: float) -> None:
        """Add a profiled step to the sum; one that ran ``long`` or more, on its own too."""
        stats = pstats.Stats(step)
        if self.profiled_stats is None:
            self.profiled_stats = stats
        else:
            self.profiled_stats.add(stats)
        if spent < self.long:
            return
        own = [  # this project's functions, by cumulative time
            (cum, f"{Path(file).name}:{line}({func})")
            for (file, line, func), (_, _, _, cum, _) in stats.stats.items()  # type: ignore[attr-defined]
            if "/fleetwatch/" in file or "/exporter/" in file or "/reactor/" in file
        ]
        own.sort(reverse=True)
        heavy = sorted(  # any function, by its own time: what the project's called
            (
                (own_t, f"{Path(file).name}:{line}({func})")
                for (file, line, func), (_, _, own_t, _, _) in stats.stats.items()
            ),  # type: ignore[attr-defined]
            reverse=True,
        )
        entry = {
            "at_s": round(time.perf_counter() - self.t0, 2),
            "ms": round(spent * 1000, 1),
            "top": [[round(c * 1000, 1), n] for c, n in own[:12]],
            "own_time": [[round(c * 1000, 1), n] for c, n in heavy[:8]],
        }
        self.long_steps.append(entry)

    def profiled(self, top: int = 45) -> list[str]:
        """The profiled callbacks' functions by cumulative time, the longest first."""
        if self.profiled_stats is None:
            return []
        out = io.StringIO()
        self.profiled_stats.stream = out  # type: ignore[attr-defined]
        self.profiled_stats.sort_stats("cumulative").print_stats(top)
        return out.getvalue().splitlines()

    def summary(self) -> dict[str, Any]:
        busy = sorted(self.busy)

        def q(p: float) -> float:
            if not busy:
                return 0.0
            return round(busy[min(len(busy) - 1, int(p * len(busy)))] * 1000, 2)

        return {
            "turns": len(busy),
            "busy_ms": {"p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": q(1.0)},
            "over_50ms": sum(1 for b in busy if b > 0.05),
            "over_100ms": sum(1 for b in busy if b > 0.1),
            "gc_s": round(self.gc_seconds, 3),
            "woke_late": {
                "n": len(self.woke_late),
                "over_50ms": sum(1 for w in self.woke_late if w > 0.05),
                "over_100ms": sum(1 for w in self.woke_late if w > 0.1),
                "max_ms": round(max(self.woke_late, default=0.0) * 1000, 1),
            },
            "gc": {
                str(g): {"n": len(v), "max_ms": round(max(v) * 1000, 1), "sum_s": round(sum(v), 3)}
                for g, v in sorted(self.gc_by_generation.items())
            },
            "worst_ms_per_second": {
                s: round(v * 1000, 1) for s, v in sorted(self.worst_per_second.items())
            },
            "long_turns_by_callback_ms": {
                n: [round(s * 1000, 1), self.long_calls[n]]
                for n, s in sorted(self.long_by_name.items(), key=lambda kv: -kv[1])[:30]
            },
            "longest": self.longest,
            "profile": self.profiled(),
            "long_steps": self.long_steps,
        }


def _writer(timer: TurnTimer, out: Path) -> None:
    def write() -> None:
        out.write_text(json.dumps(timer.summary(), indent=1))

    def every() -> None:
        while True:
            time.sleep(5)
            write()

    atexit.register(write)
    threading.Thread(target=every, name="turn timer writer", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--thread", default="fleetwatch probes")
    parser.add_argument("--long", type=float, default=0.05, help="s: a long turn")
    parser.add_argument("--profile", default="", help="regex: callbacks to profile")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- fleetwatch's arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    timer = TurnTimer(args.thread, args.long, args.profile)
    timer.install()
    _writer(timer, args.out)
    from fleetwatch.cli import main as fleetwatch

    sys.argv = ["fleetwatch", *command]
    return fleetwatch(command)


if __name__ == "__main__":
    sys.exit(main())
