"""The list+watch's schedule against a hostile API, walked on an injected clock (no wait).

A reflector (``fleetwatch.kube.reflector``) against an in-memory API that fails every watch in
one of the ways a struggling API server does: the requests it sends over ten virtual
minutes follow client-go's backoff (``fleetwatch.kube.backoff``): about two a second at first,
one round per 30 to 60 s from the fifth minute on. Beside it: the backoff itself, its
reset, ``Retry-After``, and events older than the object held.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import pytest

from fleetwatch.discovery.secretwatch import WatchSpec
from fleetwatch.kube.backoff import Backoff, BackoffSettings
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.kube.kubeapi import KubeApiError
from fleetwatch.kube.reflector import Reflector, older

SPEC = WatchSpec("argocd", "argocd.argoproj.io/secret-type=cluster")


class Fixed(random.Random):
    """A draw that is always ``value`` (0: the shortest waits; 0.999: the longest)."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


class Clock:
    """Virtual time: ``sleep`` moves it on at once; ``passed`` is set past ``end``, from
    when ``sleep`` never returns."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.end = float("inf")
        self.passed = asyncio.Event()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        if self.now >= self.end:
            self.passed.set()

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)
        if self.passed.is_set():  # the walk is over: no request past its end
            await asyncio.Event().wait()


def secret(uid: str, rv: str, server: str = "a") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": rv}, "data": {"s": server}}


def status(code: int) -> dict[str, Any]:
    return {"kind": "Status", "code": code, "message": f"HTTP {code}"}


class HostileApi:
    """Lists answer (unless ``mode`` is ``500``); every watch fails as ``mode`` says."""

    def __init__(self, mode: str, clock: Clock) -> None:
        self.mode = mode
        self.clock = clock
        self.requests: list[tuple[float, str]] = []  # (virtual time, verb)
        self.watch_events: list[dict[str, Any]] = []  # for mode "events"
        self.watch_lasts = 0.0  # virtual seconds a normal watch runs
        self.script: list[str] = []  # modes of the next watches, then ``mode``

    async def list(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        self.requests.append((self.clock.now, "list"))
        await asyncio.sleep(0)
        if self.mode == "500":
            raise KubeApiError(500, "server_error", "etcd is down")
        return {"items": [secret("u1", "10")], "metadata": {"resourceVersion": "10"}}

    async def watch(
        self,
        path: str,
        params: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 (fleetwatch.kube.reflector.Api's signature)
    ) -> AsyncGenerator[dict[str, Any], None]:
        self.requests.append((self.clock.now, "watch"))
        await asyncio.sleep(0)
        mode = self.script.pop(0) if self.script else self.mode
        if mode == "normal":
            self.clock.advance(30)
            return
        if mode == "410-http":
            raise KubeApiError(410, "expired", "too old resource version")
        if mode in ("500", "429"):
            retry = 5.0 if mode == "429" else None
            raise KubeApiError(int(mode), "server_error", "no", retry_after=retry)
        if mode == "garbage":  # what KubeApi makes of a line that is not JSON
            raise KubeApiError(200, "bad_response", "watch event is not JSON")
        if mode in ("410-event", "error-event"):
            yield {"type": "ERROR", "object": status(410 if mode == "410-event" else 500)}
        events, self.watch_events = self.watch_events, []  # the first watch's
        for event in events:
            yield event
        self.clock.advance(self.watch_lasts)  # "closed": 0, ends at once with no event


async def walk(api: HostileApi, clock: Clock, rng: random.Random, until: float) -> Reflector:
    """Run a reflector on ``api`` until virtual time ``until`` (s after the start)."""
    clock.end = clock.now + until
    reflector = Reflector(api, SPEC, InformerSettings(), rng=rng, clock=clock, sleep=clock.sleep)
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(clock.passed.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return reflector


def rounds(api: HostileApi) -> list[float]:
    """When each round began, relative to the first: a list, or a watch not after a list."""
    starts: list[float] = []
    previous = ""
    for at, verb in api.requests:
        if verb == "list" or previous != "list":
            starts.append(at)
        previous = verb
    return [t - starts[0] for t in starts]


MODES = ["410-event", "410-http", "error-event", "closed", "garbage", "500"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("draw", [0.0, 0.999])
async def test_a_hostile_api_gets_client_gos_schedule_about_two_a_second_then_one_per_30_s(
    mode: str, draw: float
) -> None:
    clock = Clock()
    api = HostileApi(mode, clock)
    await walk(api, clock, Fixed(draw), until=600)
    starts = rounds(api)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    base = [min(30.0, 0.8 * 2**i) for i in range(len(gaps))]
    for gap, step in zip(gaps, base, strict=True):  # each wait in [base, 2 base)
        assert step - 1e-9 <= gap < 2 * step, (mode, gaps)  # (1e-9: float sums)
    per_round = 2 if mode in ("410-event", "410-http") else 1
    first_10_s = [t for t, _ in api.requests if t - api.requests[0][0] < 10]
    assert len(first_10_s) <= 4 * per_round + 1  # 4 rounds (and the first list) in 10 s
    late = [t for t in starts if t >= 300]  # from the fifth minute: one round per 30-60 s
    assert 5 <= len(late) <= 10
    assert all(gap >= 30 - 1e-9 for gap in gaps[6:])
    assert len(api.requests) <= 25 * per_round + 1  # where no backoff sent ~10^5


async def test_each_failed_round_is_counted_by_what_went_wrong() -> None:
    expected = {
        "410-event": ("restarts", "expired"),
        "410-http": ("restarts", "expired"),
        "error-event": ("errors", "server_error"),
        "closed": ("restarts", "short"),
        "garbage": ("errors", "bad_response"),
        "500": ("errors", "server_error"),
    }
    for mode, (counter, reason) in expected.items():
        clock = Clock()
        reflector = await walk(HostileApi(mode, clock), clock, Fixed(0.5), until=60)
        assert getattr(reflector, counter)[reason] >= 5, mode
        assert reflector.restarts["closed"] == 0, mode
        assert reflector.synced == (mode != "500"), mode


async def test_retry_after_is_waited_when_longer_than_the_backoff() -> None:
    clock = Clock()
    api = HostileApi("429", clock)
    await walk(api, clock, Fixed(0.0), until=30)
    watches = [t for t, verb in api.requests if verb == "watch"]
    gaps = [b - a for a, b in itertools.pairwise(watches)]
    # the server's 5 s, not the backoff's 0.8, 1.6 and 3.2; then the backoff, once longer
    assert gaps[:4] == pytest.approx([5.0, 5.0, 5.0, 6.4])


async def test_a_watch_that_ran_normally_resets_the_backoff() -> None:
    clock = Clock()
    api = HostileApi("closed", clock)
    api.script = ["closed"] * 5 + ["normal"] + ["closed"] * 3
    await walk(api, clock, Fixed(0.0), until=100)
    watches = [t for t, verb in api.requests if verb == "watch"]
    gaps = [b - a for a, b in itertools.pairwise(watches)]
    # five closed at once (0.8 ... 12.8 s), one that ran 30 s, then from the first step
    assert gaps[:8] == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 30, 0.8, 1.6])


def test_the_backoff_steps_as_client_go_and_resets_after_two_quiet_minutes() -> None:
    clock = Clock()
    shortest = Backoff(clock=clock, rng=Fixed(0.0))
    assert [shortest.next() for _ in range(9)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 30]
    longest = Backoff(clock=clock, rng=Fixed(0.999))
    waits = [longest.next() for _ in range(8)]
    assert waits[0] == pytest.approx(1.5992) and waits[-1] == pytest.approx(59.97)
    clock.now += 119  # a wait asked for within two minutes: the schedule goes on
    assert shortest.next() == 30
    clock.now += 121  # none for over two minutes: from the start
    assert [shortest.next() for _ in range(2)] == [0.8, 1.6]
    small = Backoff(BackoffSettings(initial=0.05, cap=0.2), clock=clock, rng=Fixed(0.0))
    assert [small.next() for _ in range(4)] == [0.05, 0.1, 0.2, 0.2]


async def test_an_event_older_than_the_object_held_is_ignored() -> None:
    clock = Clock()
    api = HostileApi("events", clock)
    api.watch_lasts = 30.0
    api.watch_events = [
        {"type": "MODIFIED", "object": secret("u1", "7", server="older")},
        {"type": "DELETED", "object": secret("u1", "8")},
        {"type": "MODIFIED", "object": secret("u1", "12", server="newer")},
        {"type": "MODIFIED", "object": secret("u1", "11", server="older again")},
        {"type": "ADDED", "object": secret("u2", "opaque-3")},
        {"type": "MODIFIED", "object": secret("u2", "opaque-1")},  # opaque: taken
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
    ]
    reflector = await walk(api, clock, Fixed(0.0), until=40)  # a watch with events, another
    assert reflector.restarts["closed"] >= 1
    assert reflector.store["u1"]["data"] == {"s": "newer"}
    assert reflector.store["u1"]["metadata"]["resourceVersion"] == "12"
    assert reflector.store["u2"]["metadata"]["resourceVersion"] == "opaque-1"
    assert reflector.errors["stale_event"] == 3
    assert reflector.resource_version == "9"  # a bookmark sets it, whatever it is


@pytest.mark.parametrize(
    ("version", "than", "result"),
    [
        ("7", "12", True),
        ("12", "12", False),
        ("13", "12", False),
        ("9", "10", True),  # as numbers, not as strings
        ("abc", "12", False),  # opaque: never older
        ("7", "", False),
        ("", "7", False),
        ("٣", "7", False),  # a digit that is not ASCII is not a revision
    ],
)
def test_resource_versions_compare_as_integers_only_when_both_are(
    version: str, than: str, result: bool
) -> None:
    assert older(version, than) is result
