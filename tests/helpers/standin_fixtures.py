"""The stand-ins' fixtures, defined once: ``mgmt`` (management) and ``fleet`` (workload).

A pytest plugin (tests/conftest.py loads it through ``pytest_plugins``), so every folder
gets the same fixtures instead of a copy each. What differs between tests is what they
seed and how the stand-in is set, and that is a fixture of its own that a module (or a
folder's conftest) overrides, or that a test sets by indirect parametrisation:

- ``mgmt_settings``: the management stand-in's settings (default: a bookmark every 0.2 s,
  so that watches resume quickly);
- ``mgmt_seed``: the objects the management stand-in holds before the test starts;
- ``fleet_seed``: the clusters the workload fleet serves before the test starts, as
  ``(name, keyword arguments of StandinFleet.add_cluster)``.

Both fixtures are function-scoped: each test has its own stand-in under its own
``tmp_path``, so tests do not see each other's objects. A module that needs a wider scope
(a fleet shared by a module's tests, a stand-in in a thread or a process) keeps its own
fixture under another name and says why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.standin import StandinFleet
from fleetwatch.standin.management import ManagementCluster, ManagementSettings


@pytest.fixture
def mgmt_settings() -> ManagementSettings:
    """How the management stand-in is set (override in a module that wants other settings)."""
    return ManagementSettings(bookmark_seconds=0.2)


@pytest.fixture
def mgmt_seed(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """What the management stand-in holds at the start: an indirect ``param``, else none."""
    return list(getattr(request, "param", []))


@pytest.fixture
async def mgmt(
    tmp_path: Path, mgmt_settings: ManagementSettings, mgmt_seed: list[dict[str, Any]]
) -> AsyncIterator[ManagementCluster]:
    """A stand-in management cluster on the test's event loop, seeded with ``mgmt_seed``."""
    async with ManagementCluster(tmp_path / "mgmt", mgmt_settings) as started:
        if mgmt_seed:
            started.seed(mgmt_seed)
        yield started


@pytest.fixture
def fleet_seed(request: pytest.FixtureRequest) -> list[tuple[str, dict[str, Any]]]:
    """The fleet's clusters at the start: ``param`` of an indirect parametrisation, else none."""
    return list(getattr(request, "param", []))


@pytest.fixture
async def fleet(
    tmp_path: Path, fleet_seed: list[tuple[str, dict[str, Any]]]
) -> AsyncIterator[StandinFleet]:
    """A stand-in workload fleet on the test's event loop, serving ``fleet_seed``."""
    async with StandinFleet(tmp_path / "fleet") as started:
        for name, options in fleet_seed:
            await started.add_cluster(name, **options)
        yield started
