"""One budget per turn of the probe loop for its probe steps, reconnection starts and TLS
handshake steps (``exporter.net.turns.TurnBudget``).

Before, only the handshakes had a budget, and a turn held besides them every probe step
the slots given back had woken and a hundred reconnection starts: turns of 90-170 ms on
a loaded machine at 20,000 clusters (bench/RESULTS.md, round 16). These tests hold each
kind to the shared budget with a clock of their own, and check that what waits is still
run: every task, handshake step, probe and reconnection, none lost, none starved.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from pathlib import Path

from exporter.model import ProbeResult
from exporter.net import FleetClient, Slot
from exporter.net.credentials import Credentials
from exporter.net.probe import ApiClient
from exporter.net.proxy import Proxy
from exporter.net.turns import TurnBudget
from fleetwatch.discovery.clusters import Cluster, ContextConfig
from tests.exporter.test_exporter_slices import Ticker
from tests.helpers.exporter_helpers import MonitorFactory
from tests.helpers.kubeconfig_docs import kubeconfig


class Clock:
    """A clock the test moves: a step of work is what the test adds to it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _per_turn(turns: list[int]) -> dict[int, int]:
    return {t: turns.count(t) for t in set(turns)}


async def test_task_steps_past_the_budget_wait_for_later_turns_and_every_one_runs() -> None:
    clock = Clock()
    budget = TurnBudget(0.010, clock)
    ran: list[tuple[int, int]] = []  # (turn, task)

    async def step(i: int, ticker: Ticker) -> None:
        await budget.turn()
        ran.append((ticker.turns, i))
        clock.now += 0.004  # each step 4 ms of the turn

    with Ticker() as ticker:
        async with asyncio.timeout(10):
            await asyncio.gather(*(step(i, ticker) for i in range(40)))
    # every one ran, once; no turn started steps past the budget by more than one step
    # (3 of 4 ms: 8 ms spent when the third starts); one turn would run all 40 otherwise
    assert sorted(i for _, i in ran) == list(range(40))
    assert max(_per_turn([t for t, _ in ran]).values()) == 3
    assert budget.waiting == 0 and budget.deferred >= 37
    # the first three came first, in order; the rest in order but for a batch woken on
    # the first guess of a step's cost (0.7 ms), which the turn could not hold
    assert [i for _, i in ran[:3]] == [0, 1, 2]


async def test_handshake_steps_and_task_steps_draw_from_one_budget_first_come_first_served() -> (
    None
):
    clock = Clock()
    budget = TurnBudget(0.010, clock)
    order: list[str] = []
    parked: list[str] = []

    def handshake(name: str) -> None:
        order.append(name)
        clock.now += 0.004

    async def probe(name: str) -> None:
        await budget.turn()
        order.append(name)
        clock.now += 0.001

    await budget.turn()  # this test's own step: the turn's first work, 8 ms of it
    order.append("probe a")
    clock.now += 0.008
    budget.run(lambda: handshake("handshake 1"), lambda: parked.append("1"))  # 8 ms: runs
    budget.run(lambda: handshake("handshake 2"), lambda: parked.append("2"))  # 12 ms: waits
    # a probe's step in the same turn waits too, behind the handshake step that waits
    async with asyncio.timeout(5):
        await probe("probe b")
    assert order == ["probe a", "handshake 1", "handshake 2", "probe b"]
    assert parked == ["2"] and budget.waiting == 0 and budget.deferred == 2


async def test_a_task_cancelled_while_it_waits_is_skipped_and_the_others_all_run() -> None:
    budget = TurnBudget(1e-9)  # one work a turn, about
    ran: list[int] = []
    started = asyncio.Event()

    async def step(i: int) -> None:
        if i == 0:
            await budget.turn()
            started.set()
            await asyncio.Event().wait()  # holds nothing of the budget: it waits
        await budget.turn()
        ran.append(i)

    tasks = [asyncio.create_task(step(i)) for i in range(12)]
    await asyncio.wait_for(started.wait(), 5)
    tasks[5].cancel()  # waiting for its turn now
    tasks[0].cancel()
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
    assert sorted(ran) == [1, 2, 3, 4, 6, 7, 8, 9, 10, 11]
    assert isinstance(results[5], asyncio.CancelledError)
    assert budget.waiting == 0


async def test_a_cycle_starts_a_few_probes_a_turn_under_a_small_budget_and_records_all(
    kubeconfig_dir: Path, make_monitor: MonitorFactory
) -> None:
    names = [f"c{i:03d}" for i in range(300)]
    # refused at once (nothing listens on port 1): no server, no wait
    (kubeconfig_dir / "k.yaml").write_text(kubeconfig(*names, server="https://127.0.0.1:1"))
    async with make_monitor(probe_timeout=5.0, concurrency=64) as (monitor, rec):
        monitor.client.turns.budget = 1e-9  # one or two probe steps a turn
        with Ticker(lambda: monitor.stats.probes_started) as ticker:
            await monitor.run_cycle()
    counts = [n for n in ticker.samples if isinstance(n, int)]
    started_per_turn = [b - a for a, b in itertools.pairwise(counts)]
    # before: the slots given back woke the concurrency's worth (64) in one turn
    assert max(started_per_turn) <= 4
    assert monitor.stats.probes_started == 300
    assert sorted(v.cluster.name for v in rec.last.clusters) == names
    assert monitor.client.turns.waiting == 0 and monitor.client.turns.deferred > 200


async def test_reconnections_start_a_few_a_turn_under_a_small_budget_and_all_end() -> None:
    client = FleetClient(timeout=5.0, interval=30.0)
    client.turns.budget = 1e-9
    started: list[int] = []
    try:
        with Ticker() as ticker:

            async def preconnect(
                url: str,
                *,
                context: ssl.SSLContext | None,
                server_hostname: str | None,
                proxy: Proxy | None = None,
                deadline: float | None = None,
            ) -> None:
                started.append(ticker.turns)

            client.http.preconnect = preconnect  # type: ignore[method-assign]
            creds = Credentials(None, {})
            for i in range(200):
                api = ApiClient(client.http, f"http://127.0.0.1:{1000 + i}", creds)
                client.reconnect_later(f"c{i}", api)
            async with asyncio.timeout(10):
                await client.settle()
        # before: all 200 started in the turn after
        assert len(started) == 200
        assert max(_per_turn(started).values()) <= 4
        assert client.reconnecting("c0") is None and client.turns.waiting == 0
    finally:
        await client.aclose()


async def test_probes_whose_credentials_come_together_go_on_a_few_a_turn() -> None:
    client = FleetClient(timeout=5.0, interval=30.0, environ={})
    client.turns.budget = 1e-9
    built = asyncio.Event()  # the credential workers end every build at once
    asked: list[str] = []
    all_asked = asyncio.Event()  # every probe waits for its credentials
    went_on: list[int] = []

    async def resolve(ctx: ContextConfig) -> tuple[Credentials, bool]:
        asked.append(ctx.context)
        if len(asked) == 100:
            all_asked.set()
        await built.wait()
        return Credentials(None, {}), True

    client.credentials.resolve = resolve  # type: ignore[method-assign]
    try:
        with Ticker() as ticker:

            async def readyz(
                api: ApiClient,
                timeout: float,  # noqa: ASYNC109 - as FleetClient._readyz
                slot: Slot,
            ) -> ProbeResult:
                went_on.append(ticker.turns)
                return ProbeResult(True, None, 0.0, 200, "")

            client._readyz = readyz  # type: ignore[method-assign]
            probes = [
                asyncio.create_task(
                    client.probe(
                        Cluster(f"c{i}", "http://127.0.0.1:1", "/k/a.yaml", f"c{i}"),
                        ContextConfig("/k/a.yaml", f"c{i}", (0, 0, 0, 0, 0), None),  # type: ignore[arg-type]
                        Slot(None),
                    )
                )
                for i in range(100)
            ]
            await asyncio.wait_for(all_asked.wait(), 10)
            built.set()
            async with asyncio.timeout(10):
                results = await asyncio.gather(*probes)
        # before: all 100 went on in the turn after the builds ended
        assert [r.result.success for r in results] == [True] * 100
        assert len(went_on) == 100 and max(_per_turn(went_on).values()) <= 4
    finally:
        await client.aclose()
