"""A bounded pool of daemon threads for credential work, apart from the default executor.

Resolving credentials may block for as long as a plugin or a file system lets it.
Discovery and rendering run on the event loop's default executor; if credential work
shared it, a handful of stuck resolutions would take every thread and stop the cycles
while ``/metrics`` kept serving old values. Credential work runs here instead:

- a fixed number of threads, so it never takes more than its share of the machine;
- daemon threads, so a thread still blocked when the exporter stops can never hold the
  process up (the interpreter joins the default executor's threads at exit, not these);
- :meth:`Workers.shutdown` cancels the work not yet started.

It is a ``concurrent.futures.Executor``: ``loop.run_in_executor(workers, fn, *args)``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Item = tuple[Future[Any], Callable[[], Any]]


class Workers(Executor):
    """``size`` daemon threads, started on first use, named ``{name} N``."""

    def __init__(self, size: int, name: str) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one thread")
        self.size = size
        self.name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: shut down")
            self._queue.put((future, lambda: fn(*args, **kwargs)))
            if len(self._threads) < self.size:
                thread = threading.Thread(
                    target=self._work, name=f"{self.name} {len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, call = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while it waited: its caller gave up
            try:
                result = call()
            except BaseException as exc:  # handed to the caller, as concurrent.futures does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = True) -> None:
        """Stop taking work; cancel what has not started; never wait for a blocked thread
        unless ``wait`` (tests), and then only for the work already running."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()
