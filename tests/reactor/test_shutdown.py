"""Shutdown never closes the store under a running WAL checkpoint.

The housekeeping task checkpoints on a thread of its own. Cancelling it does not stop that
thread, so closing the store right after pulled the connection away from a running
checkpoint: the reactor died of SIGSEGV on SIGTERM after a large cascade (a big WAL, a long
checkpoint), seen as exit code -11 in test_process.py under load.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import reactor.app
from reactor.app import create_app
from reactor.context import ReactorSettings
from reactor.store.sqlite import SQLiteStore


class WatchedStore(SQLiteStore):
    """A real store that records whether ``close`` ever runs while a checkpoint does."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.checkpointing = threading.Event()
        self.closed = threading.Event()
        self.closed_during_checkpoint: list[bool] = []

    def checkpoint(self) -> int:
        self.checkpointing.set()
        try:
            left = super().checkpoint()
            # A slow checkpoint (a big WAL, a slow disk): over when the store closes, or
            # after a bound, whichever comes first.
            self.closed.wait(0.3)
            return left
        finally:
            self.checkpointing.clear()

    def close(self) -> None:
        self.closed_during_checkpoint.append(self.checkpointing.is_set())
        self.closed.set()
        super().close()


async def test_close_waits_for_a_running_checkpoint(
    aiohttp_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reactor.app, "HOUSEKEEPING_INTERVAL_S", 0.01)
    stores: list[WatchedStore] = []

    def factory() -> WatchedStore:
        stores.append(WatchedStore(tmp_path / "state.db"))
        return stores[0]

    app = create_app(
        ReactorSettings(db_path=tmp_path / "state.db"),
        registry=CollectorRegistry(),
        store_factory=factory,
    )
    client = await aiohttp_client(app)
    assert (await client.get("/healthz")).status == 200
    await asyncio.wait_for(asyncio.to_thread(stores[0].checkpointing.wait, 10), 15)
    await client.close()
    assert stores[0].closed_during_checkpoint == [False]


CLOSE_DURING_CHECKPOINT = """
import sys, threading
from reactor.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
store.checkpoint()  # opens the checkpoint connection
with store.write() as tx:  # a WAL big enough for the next checkpoint to take a while
    tx.db.execute("CREATE TABLE junk (x BLOB)")
    tx.db.executemany("INSERT INTO junk VALUES (randomblob(4000))", [()] * 20000)
started = threading.Event()
real = store._checkpointer
class Announcing:
    # The worker keeps the GIL from set() until SQLite releases it inside the checkpoint,
    # so close() below runs while the checkpoint does.
    def execute(self, sql):
        started.set()
        return real.execute(sql)
    def close(self):
        real.close()
store._checkpointer = Announcing()
left = []
worker = threading.Thread(target=lambda: left.append(store.checkpoint()))
worker.start()
started.wait()
store.close()
worker.join()
print("clean" if left else "the checkpoint failed")
"""


def test_the_store_closes_safely_under_a_running_checkpoint(tmp_path: Path) -> None:
    """``checkpoint`` is callable from any thread, so ``close`` must wait for it itself.

    Without that, closing under a running checkpoint is a use-after-free in SQLite: a
    segfault, or a MemoryError in the checkpoint's thread.
    """
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_DURING_CHECKPOINT, str(tmp_path / "state.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "clean"), done.stderr[-2000:]
