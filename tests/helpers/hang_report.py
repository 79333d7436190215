"""What a hung asyncio test was waiting on, printed just before pytest-timeout fails it.

pytest-timeout prints every thread's stack when a test passes its deadline, but a test
hung on an event loop shows only the loop idle in ``select``: the stack that matters is
the coroutine's, suspended on a future nobody will complete. A few seconds before the
deadline this plugin asks the main thread's running loop (if there is one) to print each
of its tasks' stacks; the lines land in the test's captured output, beside the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import sys
import threading
from collections.abc import Generator
from types import FrameType

import pytest

#: How long before pytest-timeout's deadline the tasks are printed.
AHEAD_S = 10.0


def _running_loop(frame: FrameType | None) -> asyncio.AbstractEventLoop | None:
    """The event loop a thread is running, found on its stack (``run_forever``'s ``self``)."""
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if frame.f_code.co_name == "run_forever" and isinstance(
            candidate, asyncio.AbstractEventLoop
        ):
            return candidate
        frame = frame.f_back
    return None


def _awaiting(awaitable: object) -> list[str]:
    """Where a suspended coroutine is, down the chain of what it awaits (a task's own
    stack holds only its outermost frame)."""
    lines: list[str] = []
    while awaitable is not None and len(lines) < 40:
        frame = next(
            (
                getattr(awaitable, a)
                for a in ("cr_frame", "gi_frame", "ag_frame")
                if getattr(awaitable, a, None) is not None
            ),
            None,
        )
        if frame is not None:
            lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        following = None
        for attribute in ("cr_await", "gi_yieldfrom", "ag_await"):
            following = getattr(awaitable, attribute, None)
            if following is not None:
                break
        if following is None and frame is None:
            lines.append(f"  awaiting {awaitable!r}"[:300])
        awaitable = following
    return lines


def _print_tasks(nodeid: str) -> None:
    out = [f"\n+++ {nodeid}: near its deadline, the event loop's tasks +++"]
    for task in asyncio.all_tasks():
        out.append(f"--- task {task.get_name()}")
        out += _awaiting(task.get_coro())
    # An async generator's __anext__ hides the generator from the chain above: the
    # generators suspended mid-step (a fixture's teardown) are listed on their own.
    for found in gc.get_objects():
        if inspect.isasyncgen(found) and found.ag_running:
            out.append(f"--- async generator {found.__qualname__}")
            out += _awaiting(found)
    print("\n".join(out), file=sys.stderr, flush=True)


def _report(nodeid: str, main: int) -> None:
    loop = _running_loop(sys._current_frames().get(main))
    if loop is None or loop.is_closed():
        return
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        loop.call_soon_threadsafe(_print_tasks, nodeid)


def _deadline(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    deadline = _deadline(item)
    timer = None
    if deadline > AHEAD_S:
        timer = threading.Timer(
            deadline - AHEAD_S, _report, (item.nodeid, threading.main_thread().ident)
        )
        timer.daemon = True
        timer.start()
    try:
        return (yield)
    finally:
        if timer is not None:
            timer.cancel()
