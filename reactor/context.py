"""What a running reactor app holds: its settings, its store thread, and their typed keys."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from reactor.metrics import ReactorMetrics
from reactor.service import Service

T = TypeVar("T")

DEFAULT_LISTEN_ADDRESS = "127.0.0.1:9714"
DEFAULT_DB_PATH = Path("fleetwatch.db")
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Settings:
    db_path: Path = DEFAULT_DB_PATH
    """SQLite file (created if missing; WAL mode adds ``-wal`` and ``-shm`` next to it)."""
    token: str | None = None
    """Bearer token required on ``POST /alerts`` and every mutating call; None: no auth."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Bigger bodies get 413. 4 MiB holds a webhook of several thousand alerts."""
    kubeconfig_path: Path | None = None
    """Main kubeconfig scanned at start-up; None (and no dir): no discovery."""
    kubeconfig_dir: Path | None = None
    """Folder of extra kubeconfigs (``*.yaml``, ``*.yml``, ``*.conf``) scanned at start-up."""


class Backend:
    """The service and the one thread that runs it.

    SQLite is blocking, so it never runs on the event loop; one thread (not a pool) also
    serialises every transaction of this process, so a deployment and a cascade for the
    same cluster can never interleave. ``BEGIN IMMEDIATE`` covers other processes.
    ``service`` is set when the app starts (the store is opened on that thread).
    """

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetwatch-store")
        self._service: Service | None = None

    @property
    def service(self) -> Service:
        if self._service is None:
            raise RuntimeError("the reactor app has not started")
        return self._service

    @service.setter
    def service(self, service: Service | None) -> None:
        self._service = service

    async def run(self, operation: Callable[[Service], T]) -> T:
        """Run ``operation(service)`` on the store thread, e.g. ``run(lambda s: s.apps())``."""
        service = self.service
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, operation, service)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True)


SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", ReactorMetrics)
BACKEND = web.AppKey("backend", Backend)
