"""Fixtures of the end-to-end tests: one stand-in fleet per session, one loop per test."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleetwatch.standin import ThreadedFleet
from tests.helpers.e2e_loop import Loop

#: (what, seconds, floor or None) measured by the tests, printed at the end of the run.
TIMINGS: list[tuple[str, float, float | None]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    have = shutil.which("prometheus") and shutil.which("prometheus-alertmanager")
    for item in items:
        if not have and "e2e" in str(item.fspath):
            item.add_marker(pytest.mark.skip(reason="needs prometheus and prometheus-alertmanager"))


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedFleet]:
    with ThreadedFleet(tmp_path_factory.mktemp("fleet")) as running:
        yield running


@pytest.fixture
def make_loop(tmp_path: Path, fleet: ThreadedFleet) -> Iterator[Callable[..., Loop]]:
    loops: list[Loop] = []

    def make(
        clusters: list[str],
        threshold: int = 2,
        repeat_interval: str = "1m",
        count_rejected: bool = True,
    ) -> Loop:
        loop = Loop(
            tmp_path / f"loop{len(loops)}", fleet, threshold, repeat_interval, count_rejected
        )
        loops.append(loop)
        return loop.start(clusters)

    yield make
    for loop in loops:
        loop.stop()


@pytest.fixture
def record_timing() -> Callable[[str, float, float | None], None]:
    def record(what: str, seconds: float, floor: float | None) -> None:
        TIMINGS.append((what, seconds, floor))
        print(f"\n{what}: {seconds:.2f} s")

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TIMINGS:
        return
    terminalreporter.section("fleetwatch end-to-end timings")
    for what, seconds, floor in TIMINGS:
        above = "" if floor is None else f"  (N x interval = {floor:g} s, {seconds - floor:+.2f} s)"
        terminalreporter.write_line(f"{what}: {seconds:.2f} s{above}")
