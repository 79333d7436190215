"""Fixtures for the stand-in API server's own tests: a started fleet, a TLS client, and a
management stand-in in a thread (``cluster``).

``cluster`` serves blocking clients (kubectl, the official kubernetes client, raw
``http.client`` reads) that would stall the test's event loop if it ran the stand-in, so
it runs in a thread of its own; ``mgmt`` (tests/helpers/standin_fixtures.py) is its
counterpart on the test's event loop. What differs between the tests that use it is what
it seeds and how it is set, and those are fixtures of their own, as for ``mgmt``: a module
overrides ``cluster_settings`` or ``cluster_seed``, or a test parametrises them (directly
or indirectly).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fleetwatch.standin import StandinFleet
from fleetwatch.standin.management import ManagementSettings, ThreadedManagementCluster


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as client:
        yield client


@pytest.fixture
def cert_ctx(fleet: StandinFleet) -> ssl.SSLContext:
    """Trusts the fleet CA and presents the fleet's client certificate."""
    return fleet.certs.client_context()


@pytest.fixture
def ca_ctx(fleet: StandinFleet) -> ssl.SSLContext:
    """Trusts the fleet CA, presents no certificate (token auth)."""
    return fleet.certs.client_context(with_cert=False)


@pytest.fixture
def cluster_settings(request: pytest.FixtureRequest) -> ManagementSettings:
    """How ``cluster`` is set: an indirect ``param``, else a bookmark every 0.3 s."""
    settings: ManagementSettings = getattr(
        request, "param", ManagementSettings(bookmark_seconds=0.3)
    )
    return settings


@pytest.fixture
def cluster_seed(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """What ``cluster`` holds at the start: an indirect ``param``, else none."""
    return list(getattr(request, "param", []))


@pytest.fixture
def cluster(
    tmp_path: Path, cluster_settings: ManagementSettings, cluster_seed: list[dict[str, Any]]
) -> Iterator[ThreadedManagementCluster]:
    """A stand-in management cluster in a thread, seeded with ``cluster_seed``."""
    with ThreadedManagementCluster(tmp_path / "mgmt", cluster_settings) as started:
        if cluster_seed:
            started.seed(cluster_seed)
        yield started
