"""Fixtures for the stand-in API server's own tests: a started fleet, a TLS client."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest

from fleetwatch.standin import StandinFleet


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
