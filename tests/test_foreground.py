"""Background loops give way while requests are answered (``fleetwatch.common.foreground``).

What is asserted is who sleeps, not how fast anything runs (bench/reactor_lists measures
that): background work sleeps while a request is in flight and no longer, loses no item,
and nothing else ever sleeps: a thread answering a request, or an event loop's thread.
Each wait is polled with a deadline; ``waited_s`` says whether a loop slept.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web

from fleetwatch.cli import build_parser
from fleetwatch.common import foreground
from fleetwatch.common.foreground import Foreground, background, give_way, paced
from fleetwatch.procs import free_port, wait_until
from reactor.app import create_app
from reactor.context import ReactorSettings

T = TypeVar("T")


@pytest.fixture
def every_item(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A check of the foreground after every item, not every 2 ms of work."""
    monkeypatch.setattr(foreground, "SLICE_S", 0.0)
    yield


def test_nothing_in_flight_never_sleeps() -> None:
    fg = Foreground()
    background(lambda: [give_way(fg) for _ in range(100)])()
    assert fg.waited_s == 0.0


def test_outside_background_work_it_never_sleeps_even_with_a_request_in_flight() -> None:
    """A thread answering a request (or an event loop's) must not wait for itself."""
    fg = Foreground()
    fg.inflight = 1
    give_way(fg)
    assert fg.waited_s == 0.0
    background(lambda: None)()  # a background function ran on this thread and ended
    give_way(fg)
    assert fg.waited_s == 0.0


def test_background_work_sleeps_while_a_request_is_in_flight_then_goes_on(
    every_item: None,
) -> None:
    fg = Foreground()
    fg.inflight = 1
    out: list[int] = []
    worker = threading.Thread(
        target=background(lambda: out.extend(paced(range(1_000), fg))), daemon=True
    )
    worker.start()
    wait_until(lambda: fg.waited_s > 0, 10, interval=0.001, what="the background loop waiting")
    fg.inflight = 0  # the request answered: the loop runs to its end
    worker.join(10)
    assert not worker.is_alive()
    assert out == list(range(1_000))  # nothing lost, nothing repeated, in order


def test_a_request_that_never_ends_slows_background_work_but_does_not_stop_it(
    every_item: None,
) -> None:
    """At most ``MAX_WAIT_S`` per check: a long request (a slow store) cannot starve it."""
    fg = Foreground()
    fg.inflight = 1
    out = background(lambda: list(paced(range(5), fg)))()
    assert out == list(range(5))
    assert fg.waited_s >= 4 * foreground.MAX_WAIT_S * 0.9


def in_marked_thread(work: Callable[[], T]) -> T:
    """``work``'s answer, run on a thread marked background (as the CD's store thread)."""
    done: list[T] = []

    def thread() -> None:
        foreground.mark_background()
        done.append(work())

    worker = threading.Thread(target=thread, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and len(done) == 1
    return done[0]


def test_a_marked_thread_gives_way_for_as_long_as_it_lives(every_item: None) -> None:
    fg = Foreground()
    fg.inflight = 1
    assert in_marked_thread(lambda: list(paced(range(2), fg))) == [0, 1]
    assert fg.waited_s > 0


async def test_the_reactor_counts_each_request_while_it_is_answered(
    aiohttp_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fg = Foreground()
    monkeypatch.setattr("reactor.api.handlers.FOREGROUND", fg)
    seen: list[int] = []
    app = create_app(ReactorSettings(db_path=tmp_path / "state.db"))

    async def probe(request: web.Request) -> web.Response:
        seen.append(fg.inflight)
        return web.Response(text="ok")

    app.router.add_get("/probe", probe)
    client = await aiohttp_client(app)
    answers = await asyncio.gather(*(client.get("/probe") for _ in range(3)))
    assert [a.status for a in answers] == [200, 200, 200]
    assert len(seen) == 3 and all(n >= 1 for n in seen)
    assert fg.inflight == 0  # each left the count once answered


def test_a_paced_list_is_a_list_whose_iteration_gives_way(every_item: None) -> None:
    """For loops that are not ours (prometheus_client formatting a family's samples)."""
    samples = foreground.Paced([1, 2, 3])
    assert samples == [1, 2, 3] and len(samples) == 3 and samples[1] == 2
    fg = foreground.FOREGROUND
    before = fg.waited_s
    fg.inflight += 1
    try:
        assert background(lambda: list(samples))() == [1, 2, 3]
    finally:
        fg.inflight -= 1
    assert fg.waited_s > before


async def test_a_scrape_is_rendered_as_background_work_and_not_counted(
    aiohttp_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its rendering gives way to requests; counted as one, it would wait for itself."""
    from reactor.api import handlers

    fg = Foreground()
    monkeypatch.setattr(handlers, "FOREGROUND", fg)
    during: list[tuple[int, bool]] = []
    real = handlers.exposition

    def rendering(registry: Any) -> bytes:
        during.append((fg.inflight, getattr(foreground._here, "background", False)))
        return real(registry)

    monkeypatch.setattr(handlers, "exposition", rendering)
    client = await aiohttp_client(create_app(ReactorSettings(db_path=tmp_path / "state.db")))
    resp = await client.get("/metrics")
    assert resp.status == 200 and b"fleetwatch_reactor_database_up 1.0" in await resp.read()
    assert during == [(0, True)]  # not counted; rendered in a background thread


def test_background_work_inside_a_marked_thread_leaves_it_marked(every_item: None) -> None:
    def work() -> bool:
        background(lambda: None)()
        return bool(foreground._here.background)

    assert in_marked_thread(work) is True


def test_the_reactor_command_serves_with_a_short_switch_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fleetwatch reactor`` serves with the switch interval of
    ``foreground.SWITCH_INTERVAL_S`` (CPython's is 5 ms): seen when it starts serving."""
    import reactor.cli

    served: list[float] = []

    def run_app(app: web.Application, sock: list[socket.socket], **_: Any) -> None:
        for one in sock:
            one.close()
        served.append(sys.getswitchinterval())

    monkeypatch.setattr(web, "run_app", run_app)
    monkeypatch.setattr(reactor.cli, "setup_logging", lambda *_: None)  # keeps pytest's
    before = sys.getswitchinterval()
    try:
        args = build_parser().parse_args(
            [
                "reactor",
                f"--web.listen-address=127.0.0.1:{free_port()}",
                f"--db.path={tmp_path / 'state.db'}",
                f"--kubeconfig={tmp_path / 'none'}",
            ]
        )
        assert reactor.cli.run_reactor(args) == 0
    finally:
        sys.setswitchinterval(before)
    assert served == [foreground.SWITCH_INTERVAL_S] != [before]
