"""An async context's life on an event loop of its own, in a thread of its own.

Why: the exporter's probe side (the list+watch of the management cluster's Secrets, the
cycles, their TLS handshakes) can hold its event loop for hundreds of milliseconds on a
loaded machine, a thousand first contacts at once; a scrape served by that loop waited
for it, up to 2.2 s at 5,000 Secrets (bench/RESULTS.md). On a loop of its own the HTTP
side only waits for the interpreter's lock, which a thread holding it gives up every few
milliseconds (``sys.getswitchinterval``), and OpenSSL's work (the handshakes' crypto)
runs without that lock.

:class:`LoopThread` enters the context on its loop, says so to :meth:`LoopThread.start`
(or hands it the exception entering raised), and exits the context when
:meth:`LoopThread.stop` asks (an orderly exit: no cancellation of the context's own
body), its loop then closed as ``asyncio.run`` closes one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

log = logging.getLogger(__name__)


class LoopThread:
    """``context()`` entered and held on a new event loop in a daemon thread ``name``."""

    def __init__(
        self, context: Callable[[], AbstractAsyncContextManager[object]], name: str
    ) -> None:
        self._context = context
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._ended: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    @property
    def name(self) -> str:
        return self._thread.name

    async def start(self) -> None:
        """Start the thread; return once the context is entered, or raise what entering it
        raised (the thread has ended then)."""
        self._thread.start()
        await asyncio.wrap_future(self._started)

    async def stop(self, within: float) -> bool:
        """Ask the context to exit and wait ``within`` s at most for the thread to end.

        False when it did not end in time (its loop is held): the thread is a daemon, and
        what it holds goes with the process.
        """
        loop, stop = self._loop, self._stop
        if loop is None or stop is None or self._ended.done():
            return True
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # its loop closed meanwhile: it has ended
            return True
        try:
            async with asyncio.timeout(within):  # not wait_for: fleetwatch.common.waits
                await asyncio.shield(asyncio.wrap_future(self._ended))
        except TimeoutError:
            log.warning("%s did not stop within %gs; leaving it to the exit", self.name, within)
            return False
        except Exception:  # it ended by an error, logged as it ended
            return True
        return True

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # the thread's end: handed over, never raised here
            if not self._started.done():
                self._started.set_exception(exc)
            else:
                log.error("%s stopped: %r", self.name, exc)
            self._ended.set_exception(exc)
        else:
            self._ended.set_result(None)

    async def _main(self) -> None:
        self._stop = stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        async with self._context():
            self._started.set_result(None)
            await stop.wait()
