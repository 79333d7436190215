"""Shared fixtures. Servers are real and local; see fleetwatch.procs for how they are run.

Helper modules live in the ``tests.helpers`` package (its docstring says why a package);
the fixtures of the stand-ins (``mgmt``, ``fleet``) are defined once, in
tests/helpers/standin_fixtures.py, a plugin this conftest loads.

Tests that start a server, a container, a database, a stand-in fleet or fleetwatch as a
process are marked ``live`` (docs/development.md#tests), so ``pytest -m "not live"`` is a
fast loop. A test that is not marked ``live`` fails if it tries to start one: the hooks
below watch ``subprocess.Popen`` (which ``subprocess.run`` and asyncio's subprocesses go
through) and the stand-in fleet during each test's set-up and call.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from exporter.net.execplugin import _GUARD as EXEC_PLUGIN_GUARD
from fleetwatch.procs import use_port_slice
from fleetwatch.standin import StandinFleet
from tests.helpers.etcd_cluster import EtcdCluster

#: The stand-ins' fixtures (``mgmt``, ``fleet``), defined once for every folder.
pytest_plugins = ["tests.helpers.standin_fixtures", "tests.helpers.hang_report"]

# Hypothesis judges each example by what it asserts, never by how long it took: its
# per-example deadline (200 ms) and its too-slow health check trip on a loaded machine
# (two cores shared with the suite's other workers), not on the code. A test's own
# ``@settings`` (max_examples) still applies on top of this profile.
settings.register_profile("fleetwatch", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fleetwatch")

#: Programs a test that is not ``live`` may run: short-lived tools, none of them a server.
TOOLS = frozenset(
    {
        "git",
        "ruff",
        "mypy",
        "lint-imports",
        "promtool",
        "amtool",
        "kubectl",
        "checkov",
        "systemd-analyze",
    }
)
#: ``python -m`` of these is a tool too (the dashboards' JSON generator).
PYTHON_TOOLS = frozenset({"dashboards"})


#: The modules that take longest, longest first (measured, docs/development.md#tests). Under
#: pytest-xdist (scripts/test.sh: each module on one worker, in collection order) they
#: start first, so that the run does not end waiting on one of them; the image's build
#: (a setup of minutes, shared by test_image and test_manifest_smoke) goes early too.
#: xdist hands a worker with at most 2 tests to run a second module at once: the fifth
#: goes to schemathesis' worker (its 1 test runs 3-8 minutes), so it is a short one.
SLOW_FIRST = (
    "tests/reactor/test_schemathesis.py",
    "tests/deploy/test_discovery_pods.py",
    "tests/deploy/test_image.py",
    "tests/bench/test_secret_discovery.py",
    "tests/deploy/test_image_build.py",
    "tests/deploy/test_manifest_smoke.py",
    "tests/e2e/test_resilience.py",
    "tests/test_layout.py",
    "tests/deploy/test_manifests.py",
    "tests/reactor/test_openapi.py",
    "tests/reactor/test_fuzz.py",
    "tests/reactor/test_process.py",
    "tests/reactor/test_api.py",
    "tests/reactor/test_replicas.py",
    "tests/rules/test_rules.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest-xdist worker picks the free ports of its servers in a slice of its own
    (fleetwatch.procs.use_port_slice says why)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    use_port_slice(int(worker.removeprefix("gw")), count)


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves a task running: every task must be owned and awaited.

    Added to every asyncio test whose event loop is its own (below), first, so that it is
    torn down last: after the test's other fixtures have stopped what they started.
    """
    yield
    current = asyncio.current_task()
    leaked = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert leaked == [], f"tasks left running: {[t.get_name() for t in leaked]}"


def _own_loop(item: pytest.Item) -> bool:
    """An asyncio test on a loop of its own; a loop shared by a module's tests holds
    tasks that outlive one test by design (their fixtures' servers)."""
    marker = item.get_closest_marker("asyncio")
    if marker is None:
        return False
    return marker.kwargs.get("loop_scope", marker.kwargs.get("scope", "function")) == "function"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The task-leak guard on every asyncio test; under pytest-xdist, the slowest modules
    first (in one process, the usual order)."""
    for item in items:
        if _own_loop(item) and "no_leaked_tasks" not in getattr(item, "fixturenames", []):
            item.fixturenames.insert(0, "no_leaked_tasks")  # type: ignore[attr-defined]
    if not hasattr(config, "workerinput"):
        return
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


class NotMarkedLive(RuntimeError):
    """A test that is not marked ``live`` started a server, a container or a fleet."""


def _argv(args: Any, kwargs: dict[str, Any]) -> list[str]:
    given = kwargs.get("args", args[0] if args else "")
    if isinstance(given, (str, bytes, os.PathLike)):
        given = os.fsdecode(given).split() if kwargs.get("shell") else [given]
    return [os.fsdecode(a) for a in given]


def _allowed(argv: list[str]) -> bool:
    """A listed tool, an exec credential plugin the exporter runs (under its deadline
    guard), or Python running a snippet, a script or a listed tool, but never fleetwatch:
    what ``live`` means is written in docs/development.md#tests."""
    if not argv:
        return False
    program = os.path.basename(argv[0])
    if program in TOOLS:
        return True
    if program == "sh" and argv[1:3] == ["-c", EXEC_PLUGIN_GUARD]:
        return True
    if os.path.realpath(argv[0]) != os.path.realpath(sys.executable) or len(argv) < 2:
        return False
    return (
        argv[1] == "-c" or argv[1].endswith(".py") or argv[1:3] in (["-m", m] for m in PYTHON_TOOLS)
    )


@contextmanager
def _unless_live(item: pytest.Item) -> Iterator[list[str]]:
    """Refuse, and note, every server a test that is not ``live`` starts."""
    started: list[str] = []
    if item.get_closest_marker("live") is not None:
        yield started
        return
    popen_init = subprocess.Popen.__init__
    fleet_start = StandinFleet.start

    def refuse(what: str) -> NotMarkedLive:
        started.append(what)
        return NotMarkedLive(f"{what}: mark the test live (docs/development.md#tests)")

    def guarded_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        argv = _argv(args, kwargs)
        if not _allowed(argv):
            raise refuse(f"started {' '.join(argv)[:200]!r}")
        popen_init(self, *args, **kwargs)

    async def guarded_start(self: StandinFleet) -> StandinFleet:
        raise refuse("started a stand-in fleet")

    subprocess.Popen.__init__ = guarded_init  # type: ignore[method-assign]
    StandinFleet.start = guarded_start  # type: ignore[method-assign]
    try:
        yield started
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        StandinFleet.start = fleet_start  # type: ignore[method-assign]


def _guard(item: pytest.Item) -> Generator[None, object, object]:
    with _unless_live(item) as started:
        try:
            result = yield
        except BaseException:
            if not started:
                raise
        if started:  # whatever the test made of the refusal, even when it passed
            message = f"not marked live, but {'; '.join(started)}"
            raise pytest.fail.Exception(message, pytrace=False) from None
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guard(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guard(item))


@pytest.fixture(scope="module")
def etcd_cluster() -> Iterator[EtcdCluster]:
    """A real 3-member etcd, shared by the tests of one module (starting one costs 0.2-2.7 s).

    The data dirs live in a folder of our own, not pytest's numbered basetemp, which a
    concurrent pytest run may rotate away under a running etcd.
    """
    with tempfile.TemporaryDirectory(prefix="fleetwatch-etcd-") as root:
        cluster = EtcdCluster(Path(root)).start()
        try:
            yield cluster
        finally:
            cluster.stop()
