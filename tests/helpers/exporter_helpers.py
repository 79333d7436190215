"""Helpers shared by the exporter tests (importable: conftest.py is not)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from exporter.cycle import Monitor
from exporter.expose.snapshot import ClusterView, Snapshot


class Recorder:
    """The publisher of a test Monitor: keeps every snapshot."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []

    async def __call__(self, snap: Snapshot) -> None:
        self.snapshots.append(snap)

    @property
    def last(self) -> Snapshot:
        return self.snapshots[-1]

    def view(self, name: str) -> ClusterView:
        return next(v for v in self.last.clusters if v.cluster.name == name)


MonitorFactory = Callable[..., AbstractAsyncContextManager[tuple[Monitor, Recorder]]]
