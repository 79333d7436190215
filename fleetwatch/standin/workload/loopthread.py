"""A stand-in's servers on a private event loop in a thread, driven by blocking calls.

Synchronous code (sync tests, the benchmarks, ``fleetwatch demo``) drives the asyncio
stand-ins this way: :class:`OnLoopThread` owns the loop and its thread, starts and stops
the servers on it, and runs each call there (:meth:`OnLoopThread._call`), waiting at most
``call_timeout`` seconds. ``ThreadedFleet`` and ``ThreadedManagementCluster`` add the
blocking methods of their stand-in.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

T = TypeVar("T")


class OnLoopThread:
    """The loop, its thread, start and stop; a subclass says what runs on it."""

    #: the thread's name, and what an error calls the stand-in
    thread_name = "standin"
    what = "the stand-in"

    def __init__(self, call_timeout: float) -> None:
        self.call_timeout = call_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def _start_servers(self) -> None:
        raise NotImplementedError

    async def _stop_servers(self) -> None:
        raise NotImplementedError

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError(f"{self.what} is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.call_timeout)

    def start(self) -> Self:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        try:
            self._call(self._start_servers())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._call(self._stop_servers())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(self.call_timeout)
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
