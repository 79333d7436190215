"""Fixtures of the exporter tests: a stand-in fleet, a Monitor that records what it publishes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from exporter.checks import ClusterCheck
from exporter.cycle import DiscoverySource, Monitor
from exporter.model import CycleSettings
from exporter.net import install_patches
from fleetwatch.discovery import Discoverer
from tests.helpers.exporter_helpers import MonitorFactory, Recorder


@pytest.fixture(autouse=True, scope="session")
def kube_client_patched() -> None:
    """The patches ``fleetwatch exporter`` installs at start (tests build Monitors directly)."""
    install_patches()


@pytest.fixture
def kubeconfig_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    return folder


@pytest.fixture
def make_monitor(kubeconfig_dir: Path) -> MonitorFactory:
    @asynccontextmanager
    async def factory(
        *,
        probe_timeout: float = 2.0,
        interval: float = 60.0,
        concurrency: int = 16,
        discovery: DiscoverySource | None = None,
        checks: Sequence[ClusterCheck] = (),
        kubeconfig: Path | None = None,
    ) -> AsyncIterator[tuple[Monitor, Recorder]]:
        recorder = Recorder()
        source = discovery or Discoverer(kubeconfig, kubeconfig_dir)
        monitor = Monitor(
            CycleSettings(interval, probe_timeout, concurrency), source, recorder, checks
        )
        async with monitor:
            yield monitor, recorder

    return factory
