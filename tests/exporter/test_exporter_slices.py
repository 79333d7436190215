"""The probe loop's long turns, sliced: passes over every cluster (``exporter.net.turns.sliced``)
and deadlines passing together (``exporter.net.deadlines``).

At 20,000 clusters the cycle's own bookkeeping (the scan followed in the table, the
targets, what it leaves to forget) held the probe loop 100-225 ms a turn, and 1,000 hung
clusters timing out together 100-190 ms (bench/RESULTS.md, round 16). These tests hold
each to its slice with a clock or a count of their own, and check that a cycle read a
slice at a time still says and records what it did.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exporter.model import ProbeResult, Reason
from exporter.net import deadlines, turns
from exporter.net.credentials import CredentialCache
from exporter.net.deadlines import Deadlines, wait
from exporter.net.turns import sliced
from exporter.state import ClusterTable
from fleetwatch.discovery import Discovery
from fleetwatch.discovery.clusters import Cluster
from fleetwatch.discovery.contextauth import ContextAuth
from tests.helpers.exporter_helpers import MonitorFactory
from tests.helpers.kubeconfig_docs import kubeconfig


class Ticker:
    """Counts the turns of the running loop: a callback scheduled again at each one."""

    def __init__(self, sample: object = None) -> None:
        self.turns = 0
        self.samples: list[object] = []
        self._sample = sample
        self._handle: asyncio.Handle | None = None

    def __enter__(self) -> Ticker:
        self._handle = asyncio.get_running_loop().call_soon(self._tick)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._handle is not None
        self._handle.cancel()

    def _tick(self) -> None:
        self.turns += 1
        if callable(self._sample):
            self.samples.append(self._sample())
        self._handle = asyncio.get_running_loop().call_soon(self._tick)


async def test_a_pass_gives_the_loop_a_turn_once_its_step_has_used_the_budget() -> None:
    now = [0.0]
    per_turn: list[int] = []
    with Ticker() as ticker:
        async for _ in sliced(range(100), budget=0.01, clock=lambda: now[0]):
            now[0] += 0.004  # each item costs 4 ms: the third one ends the step
            if len(per_turn) <= ticker.turns:
                per_turn.extend([0] * (ticker.turns + 1 - len(per_turn)))
            per_turn[ticker.turns] += 1
    # one pass of 400 ms in one step before; now 3 items (12 ms) a step at most
    assert max(per_turn) == 3
    assert sum(per_turn) == 100
    assert ticker.turns >= 33


async def test_a_cheap_pass_takes_one_turn() -> None:
    with Ticker() as ticker:
        got = [i async for i in sliced(range(1000), budget=10.0)]
    assert got == list(range(1000))
    assert ticker.turns == 0


def _cluster(name: str, endpoint: str = "https://127.0.0.1:6443") -> Cluster:
    return Cluster(name=name, endpoint=endpoint, kubeconfig_secret_ref="/k/a.yaml", context=name)


def test_following_a_scan_a_cluster_at_a_time_keeps_what_was_recorded_meanwhile() -> None:
    table = ClusterTable()
    table.apply_discovery(Discovery((_cluster("a"), _cluster("b")), ()), {"/k/a.yaml": True})
    moved = Discovery((_cluster("a", "https://127.0.0.2:6443"), _cluster("c")), ())
    steps = table.follow_discovery(moved, {"/k/a.yaml": True})
    notes = [next(steps)]  # b is gone
    assert "b" not in table.states
    # a probe of a ends between two slices: the scan's later change of a keeps it
    failed = ProbeResult(False, Reason.TIMEOUT, 1.0, None, "timed out")
    table.record("a", failed, 100.0)
    notes += list(steps)
    said = [n.msg % n.args for n in notes if n is not None]
    assert said == [
        "cluster b is no longer in any kubeconfig; its series are dropped",
        "discovered cluster c (https://127.0.0.1:6443) in /k/a.yaml",
    ]
    state = table.states["a"]
    assert state.cluster.endpoint == "https://127.0.0.2:6443"
    assert state.last is failed
    assert sorted(table.states) == ["a", "c"]


async def test_a_cycle_follows_its_scan_over_many_turns_and_records_every_cluster(
    kubeconfig_dir: Path, make_monitor: MonitorFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"c{i:03d}" for i in range(300)]
    # refused at once (nothing listens on port 1): no server, no wait
    (kubeconfig_dir / "k.yaml").write_text(kubeconfig(*names, server="https://127.0.0.1:1"))
    monkeypatch.setattr(turns, "STEP_BUDGET_S", 0.0)  # every cluster a turn of its own
    async with make_monitor(probe_timeout=5.0) as (monitor, rec):
        with Ticker(lambda: len(monitor.table.states)) as ticker:
            await monitor.run_cycle()
    # the table filled over turns, not in one (before: 0 then 300, in one step)
    counts = [n for n in ticker.samples if isinstance(n, int)]
    assert len({n for n in counts if 0 < n < 300}) >= 100
    assert monitor.stats.cycles_total == 1
    assert sorted(v.cluster.name for v in rec.last.clusters) == names
    for name in names:
        view = rec.view(name)
        assert not view.success and dict(view.failures) == {Reason.CONNECT: 1}


async def test_deadlines_passing_together_expire_a_slice_a_turn() -> None:
    loop = asyncio.get_running_loop()
    timers = Deadlines()
    due = loop.time() + 0.05
    expired_at: list[int] = []

    async def request(ticker: Ticker) -> None:
        req = timers.start(due)
        try:
            await wait(loop.create_future(), req)
        except TimeoutError:
            expired_at.append(ticker.turns)
        finally:
            timers.end(req)

    n = 2 * deadlines.EXPIRE_SLICE + 50
    with Ticker() as ticker:
        async with asyncio.timeout(30):
            await asyncio.gather(*(request(ticker) for _ in range(n)))
    # every request timed out, at most a slice of them handled in any one turn (before:
    # all 250 in the turn after the timer)
    assert len(expired_at) == n
    per_turn = {t: expired_at.count(t) for t in set(expired_at)}
    assert max(per_turn.values()) == deadlines.EXPIRE_SLICE
    assert len(per_turn) == 3


async def test_the_credential_cache_prunes_over_turns_and_keeps_the_live_contexts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = CredentialCache()
    try:
        version: tuple[int, ...] = (1, 2, 3, 4)
        keys = [("/k/a.yaml", f"c{i}", version) for i in range(200)]
        for i, key in enumerate(keys):
            cache._shared[key] = ContextAuth(True, token=f"t{i}")
        live = set(keys[::2])
        monkeypatch.setattr(turns, "STEP_BUDGET_S", 0.0)
        with Ticker() as ticker:
            await cache.prune(live)
        assert set(cache._shared) == live
        # before: all 200 keys hashed in one step; now a turn each
        assert ticker.turns >= 100
    finally:
        cache.close()
