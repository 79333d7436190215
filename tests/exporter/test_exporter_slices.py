"""The probe loop's long turns, sliced: passes over every cluster (``exporter.net.turns.sliced``)
and deadlines passing together (``exporter.net.deadlines``).

At 20,000 clusters the cycle's own bookkeeping (the scan followed in the table, the
targets, what it leaves to forget) held the probe loop 100-225 ms a turn, and 1,000 hung
clusters timing out together 100-190 ms (bench/RESULTS.md, round 16); the pool's and the
credentials' passes over what the cycle left still 40-120 ms on a loaded machine (round
27). These tests hold each to its slice with a clock or a count of their own, and check
that a cycle, a pool or a cache read a slice at a time still does what it did in one.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path
from typing import Any

import pytest

from exporter.model import ProbeResult, Reason
from exporter.net import deadlines, turns
from exporter.net.credentials import CredentialCache, Credentials
from exporter.net.deadlines import Deadlines, wait
from exporter.net.pool import HttpPool
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


async def test_passes_one_after_another_share_the_step_s_budget() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    per_turn: dict[int, list[str]] = {}
    with Ticker() as ticker:
        for name in ("a", "b", "c"):  # e.g. the credentials' prune: several short passes
            async for _ in sliced(range(4), budget=0.01, clock=clock):
                now[0] += 0.004
                per_turn.setdefault(ticker.turns, []).append(name)
    # before: each pass counted from its own start, and a, b (16 ms each) ran in one
    # step; now the budget runs on from one pass to the next
    assert per_turn[0] == ["a", "a", "a"]
    assert all(len(items) <= 3 for items in per_turn.values())
    assert [n for items in per_turn.values() for n in items] == ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    assert per_turn[1] == ["a", "b", "b"]


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


async def test_a_cycle_frees_each_state_it_replaces_as_its_probe_records(
    kubeconfig_dir: Path, make_monitor: MonitorFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"c{i:03d}" for i in range(50)]
    (kubeconfig_dir / "k.yaml").write_text(kubeconfig(*names, server="https://127.0.0.1:1"))
    async with make_monitor(probe_timeout=5.0) as (monitor, rec):
        await monitor.run_cycle()
        last = [weakref.ref(s) for s in monitor.table.states.values()]
        alive: list[int] = []
        forget = monitor._forget_what_left

        async def counting(*args: Any) -> None:
            rec.snapshots.clear()  # the test's publisher keeps them all; the exporter's none
            alive.append(sum(1 for ref in last if ref() is not None))
            await forget(*args)

        monkeypatch.setattr(monitor, "_forget_what_left", counting)
        await monitor.run_cycle()
    # before: the cycle's list of the states it probed held all 50 until it ended, and
    # freed them in one step (60 ms at 20,000 on a loaded machine)
    assert alive == [0]


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
        for i, key in enumerate(keys):
            cache._entries[cache._shared[key]] = Credentials(None, {"Authorization": f"t{i}"})
        with Ticker() as ticker:
            await cache.prune(live)
        assert set(cache._shared) == live
        assert set(cache._entries) == {cache._shared[k] for k in live}
        # before: the keys hashed in one step and the entries' pass in one more; now a
        # turn each
        assert ticker.turns >= 300
    finally:
        cache.close()


class _Idle:
    """What the pool's housekeeping reads of a kept connection (no socket: the passes
    are what is tested, not the connections)."""

    def __init__(self, last_used: float) -> None:
        self.last_used = last_used
        self.closed = False
        self.pooled = True
        self.keep_alive = True

    def close(self) -> None:
        self.closed = True


def _keep(pool: HttpPool, url: str, last_used: float, name: str | None = None) -> _Idle:
    """An idle connection to ``url`` (``name``: another server name, another pool key)."""
    conn = _Idle(last_used)
    key = (pool.endpoint(url), None, name, None)
    pool._idle.setdefault(key, []).append(conn)  # type: ignore[arg-type]
    pool._idle_count += 1
    pool._kept += 1
    pool._open.add(conn)  # type: ignore[arg-type]
    return conn


async def test_the_pool_closes_what_the_cycle_left_over_turns_each_key_as_it_is_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = HttpPool()
    urls = [f"https://127.0.0.1:{20000 + i}" for i in range(200)]
    conns = [_keep(pool, url, 0.0) for url in urls]
    gone = set(urls[1::2])
    last = conns[-1]  # of a gone endpoint; taken for a request while the pass goes on
    last_key = (pool.endpoint(urls[-1]), None, None, None)

    def take_the_last() -> int:
        # the 100 routes took 100 turns: the pass over the idle connections is under way
        if ticker.turns == 150:
            assert pool._take_idle(last_key) is last  # type: ignore[arg-type]
        return pool.idle

    monkeypatch.setattr(turns, "STEP_BUDGET_S", 0.0)
    with Ticker(take_the_last) as ticker:
        closed = await pool.retain([(u, None) for u in urls if u not in gone])
    # before: the idle connections' pass in one step; now a key a turn
    assert ticker.turns >= 299
    assert closed == 99  # the taken one was in use when its turn came
    assert [c.closed for c in conns[:-1]] == [u in gone for u in urls[:-1]]
    assert not last.closed
    assert pool.idle == len(pool._idle) == 100


async def test_superseded_and_long_idle_connections_closed_over_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turns, "STEP_BUDGET_S", 0.0)
    pool = HttpPool()
    now = asyncio.get_running_loop().time()
    a, b = "https://127.0.0.1:20001", "https://127.0.0.1:20002"
    old_a = _keep(pool, a, now - 10)  # made with the credentials a's file had before
    new_a = _keep(pool, a, now, name="renewed")  # used by this cycle's probe of a
    old_b = _keep(pool, b, now - 10)  # b not used this cycle: its connection stays
    with Ticker() as ticker:
        assert await pool.retain([(a, None), (b, None)], used_since=now - 1) == 1
    assert ticker.turns >= 4
    assert (old_a.closed, new_a.closed, old_b.closed) == (True, False, False)
    assert await pool.prune_idle(5) == 1  # b's, idle 10 s
    assert (new_a.closed, old_b.closed, pool.idle) == (False, True, 1)
