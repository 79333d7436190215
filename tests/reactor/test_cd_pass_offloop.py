"""A CD pass reads the objects, plans the mirror and applies the rules off the event loop.

At 20,000 clusters and 10,000 objects each of those is tens to hundreds of milliseconds of
Python, and every pass (one per outage opened or closed, per object changed, per resync)
held the loop for all of it: webhooks and ``POST /deployments`` waited 0.3-0.4 s at p99
(bench/reactor_lists.py). Here each of the three is held, in our seam, until a ticker task
on the loop has run once more: on the loop's own thread that never happens, and the step
reports it after a short wait. Not live: the store is SQLite in a temporary file, the
management API a seam that is never called (nothing is to be patched).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reactor.cd import actuator, ledger, mirrorpass, unwatched
from reactor.cd.actuator import CdActuator
from reactor.cd.metrics import CdMetrics
from reactor.cd.settings import CdSettings
from reactor.cd.storeops import mirrored_apps
from reactor.service import Service
from reactor.store.sqlite import SQLiteStore
from tests.helpers.reactor_cd_seams import InlineRunner, NoPatches, listed_kustomization

OBJECTS = 5


class Objects:
    """Our seam for the informer: the objects as listed; ``read`` counts the reads."""

    synced = True
    generation = 0
    read = 0

    def objects(self) -> dict[str, dict[str, Any]]:
        self.read += 1
        return {f"u{i}": listed_kustomization(i) for i in range(OBJECTS)}


class Meanwhile:
    """Whether the loop ran while each step held (``ticked`` is set by a task on it)."""

    def __init__(self) -> None:
        self.ticked = threading.Event()
        self.ran: dict[str, bool] = {}

    def holding(self, what: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            if what not in self.ran:  # the first call of each step: held once
                self.ticked.clear()
                self.ran[what] = self.ticked.wait(2.0)
            return real(*args, **kwargs)

        return step

    async def ticker(self) -> None:
        while True:
            self.ticked.set()
            await asyncio.sleep(0.001)


@pytest.fixture
def meanwhile(monkeypatch: pytest.MonkeyPatch) -> Iterator[Meanwhile]:
    found = Meanwhile()
    monkeypatch.setattr(ledger, "read_seen", found.holding("read", ledger.read_seen))
    monkeypatch.setattr(mirrorpass, "plan", found.holding("plan", mirrorpass.plan))
    monkeypatch.setattr(actuator, "decide", found.holding("decide", actuator.decide))
    monkeypatch.setattr(actuator, "count_states", found.holding("count", actuator.count_states))
    yield found


async def test_the_loop_runs_while_a_pass_reads_plans_and_decides(
    tmp_path: Path, meanwhile: Meanwhile
) -> None:
    service = Service(SQLiteStore(tmp_path / "fleetwatch.db"))
    service.add_cluster("c1", "https://c1.test:6443", "secret://flux-system/c1-kubeconfig")
    registry = CollectorRegistry()
    cd = CdActuator(
        InlineRunner(service),
        Objects(),
        NoPatches(),
        CdSettings(flux=True, leader_election=None),
        CdMetrics(registry),
        asyncio.Event(),
    )
    ticker = asyncio.create_task(meanwhile.ticker())
    try:
        await cd.run_pass(full=True)
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
    assert meanwhile.ran == {"read": True, "plan": True, "decide": True, "count": True}
    mirrored = registry.get_sample_value(
        "fleetwatch_reactor_cd_objects", {"cluster": "c1", "source": "flux", "state": "running"}
    )
    assert mirrored == OBJECTS  # the pass did its work


class CountedWrites(InlineRunner):
    """The seam, counting the write transactions; ``acting`` False after ``stop_after``."""

    def __init__(self, service: Service, stop_after: int | None = None) -> None:
        super().__init__(service)
        self.writes = 0
        self.stop_after = stop_after

    async def run(self, operation: Any) -> Any:
        self.writes += 1
        return await super().run(operation)

    def acting(self) -> bool:
        return self.stop_after is None or self.writes < self.stop_after


@pytest.mark.parametrize("stop_after", [None, 1])
async def test_a_first_lists_new_apps_are_written_a_few_at_a_time_each_while_acting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_after: int | None
) -> None:
    """Five new apps, two per transaction: three writes, each asked whether the replica
    still acts; one that stopped acting after the first writes nothing more, and the
    next acting pass finishes the mirror."""
    monkeypatch.setattr(mirrorpass, "INSERTS_PER_TRANSACTION", 2)
    service = Service(SQLiteStore(tmp_path / "fleetwatch.db"))
    service.add_cluster("c1", "https://c1.test:6443", "secret://flux-system/c1-kubeconfig")
    runner = CountedWrites(service, stop_after)
    registry = CollectorRegistry()
    settings = CdSettings(flux=True, leader_election=None)
    mirror = mirrorpass.MirrorPass(runner, settings, CdMetrics(registry))
    objects = {o.app_name: o for o in (ledger.read_seen(Objects().objects()[f"u{i}"])
                                        for i in range(OBJECTS)) if o is not None}  # fmt: skip
    done = await mirror.run(objects, ({}, {}), runner.acting)
    if stop_after is None:
        assert done is not None and len(done.rows) == OBJECTS
        assert runner.writes == 3
        return
    assert done is None and runner.writes == 1  # stopped acting: no second transaction
    assert len(mirrored_apps(service)) == 2  # the first transaction's, kept
    runner.stop_after = None
    again = await mirror.run(objects, ({}, {}), runner.acting)
    assert again is not None and len(again.rows) == OBJECTS


async def test_a_pass_reads_the_objects_only_after_a_change_a_move_or_for_a_resync(
    tmp_path: Path,
) -> None:
    """A pass woken with nothing stored, dropped or moved since the last one (several
    replicas poll the store's stamp every second) does not read every object again."""
    service = Service(SQLiteStore(tmp_path / "fleetwatch.db"))
    service.add_cluster("c1", "https://c1.test:6443", "secret://flux-system/c1-kubeconfig")
    source = Objects()
    cd = CdActuator(
        InlineRunner(service),
        source,
        NoPatches(),
        CdSettings(flux=True, leader_election=None),
        CdMetrics(CollectorRegistry()),
        asyncio.Event(),
    )
    await cd.run_pass(full=False)
    assert (source.read, cd.ledger.passes) == (1, 1)  # the first pass reads
    await cd.run_pass(full=False)
    assert (source.read, cd.ledger.passes) == (1, 1)
    source.generation += 1  # an object stored or dropped
    await cd.run_pass(full=False)
    assert source.read == 2
    cd.outages_moved()
    await cd.run_pass(full=False)
    assert (source.read, cd.ledger.passes, cd.ledger.moved) == (3, 2, False)
    await cd.run_pass(full=True)
    assert (source.read, cd.ledger.passes) == (4, 3)
    await cd.run_pass(full=False)
    assert source.read == 4


class Reads(InlineRunner):
    """The seam, saying whether a read is running (where ``Backend`` runs it: a store
    thread of its own)."""

    reading = False

    async def read(self, operation: Any) -> Any:
        self.reading = True
        try:
            return await super().read(operation)
        finally:
            self.reading = False


async def test_the_unwatched_rows_are_sorted_out_within_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 rows take 8-10 ms to sort into this replica's and the others': part of the
    read, off the event loop, both before the mirror is written and after."""
    service = Service(SQLiteStore(tmp_path / "fleetwatch.db"))
    service.add_cluster("c1", "https://c1.test:6443", "secret://flux-system/c1-kubeconfig")
    runner = Reads(service)
    within: list[bool] = []
    real = unwatched.split

    def split(*args: Any) -> Any:
        within.append(runner.reading)
        return real(*args)

    monkeypatch.setattr(unwatched, "split", split)
    mirror = mirrorpass.MirrorPass(
        runner, CdSettings(flux=True, leader_election=None), CdMetrics(CollectorRegistry())
    )
    objects = {o.app_name: o for o in (ledger.read_seen(Objects().objects()[f"u{i}"])
                                        for i in range(OBJECTS)) if o is not None}  # fmt: skip
    done = await mirror.run(objects, ({}, {}), lambda: True)
    assert done is not None and len(done.rows) == OBJECTS  # written, then read again
    assert within == [True, True]
