"""Leader election's rules (reactor.cd.lease) on a fake clock: who may take the Lease, what
is written, and the one property everything rests on: a holder that cannot renew stops
acting before any other replica may begin."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from reactor.cd.lease import (
    LeaderElection,
    Lease,
    LeaseRecord,
    SeenLease,
    claim,
    lease_object,
    may_take,
    may_write,
    micro_time,
    observe,
    read_lease,
    released,
    still_leading,
)

ME, OTHER = "reactor-0_a", "reactor-1_b"
T0 = "2026-12-01T10:00:00.000000Z"
T1 = "2026-12-01T10:00:02.000000Z"


def held(holder: str, duration: int = 15, version: str = "7") -> Lease:
    return Lease(LeaseRecord(holder, duration, T0, T0, 3), version)


def test_the_timing_is_client_gos_derived_from_one_duration() -> None:
    settings = LeaderElection()
    assert (settings.lease_duration_s, settings.renew_deadline_s, settings.retry_period_s) == (
        15.0,
        10.0,
        2.0,
    )
    assert settings.name == "fleetwatch-reactor-cd" and settings.namespace is None


@pytest.mark.parametrize(
    ("what", "lease", "seen_at", "now", "allowed"),
    [
        ("nobody ever held it", held(""), 0.0, 0.0, True),
        ("this replica holds it", held(ME), 0.0, 0.0, True),
        ("another holds it, renewed just now", held(OTHER), 100.0, 100.0, False),
        ("another holds it, 14.9 s unchanged", held(OTHER), 100.0, 114.9, False),
        ("another holds it, 15 s unchanged: expired", held(OTHER), 100.0, 115.0, True),
        ("its holder's own, shorter duration counts", held(OTHER, 5), 100.0, 105.0, True),
        ("released on a clean stop", Lease(released(held(OTHER).record, T1), "8"), 100.0,
         100.0, True),
        ("a mangled duration (0) holds nobody off", held(OTHER, 0), 100.0, 100.0, True),
    ],
)  # fmt: skip
def test_who_may_take_the_lease(
    what: str, lease: Lease, seen_at: float, now: float, allowed: bool
) -> None:
    assert may_take(SeenLease(lease, seen_at), ME, now) is allowed, what


def test_expiry_is_measured_from_when_this_replica_saw_it_change_not_from_its_renew_time() -> None:
    first = observe(None, held(OTHER), 100.0)
    again = observe(first, held(OTHER), 110.0)  # unchanged: still seen since 100
    assert again.since == 100.0 and may_take(again, ME, 115.0)
    renewed = Lease(LeaseRecord(OTHER, 15, T0, T1, 3), "8")  # a renewal is a change
    seen = observe(again, renewed, 112.0)
    assert seen.since == 112.0 and not may_take(seen, ME, 115.0) and may_take(seen, ME, 127.0)


def test_what_is_written_to_create_renew_take_over_and_release() -> None:
    assert claim(None, ME, 15.0, T0) == LeaseRecord(ME, 15, T0, T0, 0)
    mine = LeaseRecord(ME, 15, T0, T0, 4)
    assert claim(mine, ME, 15.0, T1) == LeaseRecord(ME, 15, T0, T1, 4)  # renewal
    theirs = LeaseRecord(OTHER, 15, T0, T0, 4)
    assert claim(theirs, ME, 15.0, T1) == LeaseRecord(ME, 15, T1, T1, 5)  # take-over
    gone = released(mine, T1)
    assert gone == LeaseRecord("", 1, T1, T1, 4)
    assert claim(gone, OTHER, 15.0, T1).transitions == 5


def test_the_lease_object_round_trips_and_a_mangled_one_reads_as_unheld() -> None:
    record = LeaseRecord(ME, 15, T0, T1, 2)
    obj = lease_object("fleet", "fleetwatch-reactor-cd", record, "42")
    assert obj == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "fleetwatch-reactor-cd",
            "namespace": "fleet",
            "resourceVersion": "42",
        },
        "spec": {
            "holderIdentity": ME,
            "leaseDurationSeconds": 15,
            "leaseTransitions": 2,
            "acquireTime": T0,
            "renewTime": T1,
        },
    }
    assert read_lease(obj) == Lease(record, "42")
    assert "resourceVersion" not in lease_object("fleet", "l", record)["metadata"]  # a create
    mangled: dict[str, Any] = {
        "metadata": [],
        "spec": {"holderIdentity": 7, "leaseTransitions": "x"},
    }
    assert read_lease(mangled) == Lease(LeaseRecord(), "")
    assert micro_time(0.5) == "1970-01-01T00:00:00.500000Z"


def test_the_holder_acts_until_its_renew_deadline_after_its_last_renewal_began() -> None:
    settings = LeaderElection()
    assert still_leading(100.0, 109.99, settings)
    assert not still_leading(100.0, 110.0, settings)
    assert not still_leading(None, 0.0, settings)


@pytest.mark.parametrize("duration", [3.0, 5.0, 15.0, 60.0])
def test_a_holder_that_cannot_renew_stops_before_anyone_else_may_begin(duration: float) -> None:
    """Every schedule on a grid: the holder's last renewal begins at 0 and lands (is stored,
    so it can be seen) at ``landed``; another replica reads the Lease at ``seen`` (not
    before it landed) and tries again at every ``now``. Whenever the other may take it, the
    holder has stopped acting."""
    settings = LeaderElection(lease_duration_s=duration)
    step = duration / 40
    grid = [i * step for i in range(121)]
    renewed = Lease(LeaseRecord(ME, round(duration), T0, T1, 0), "9")
    for landed, seen in itertools.product(grid[:20], grid[:60]):
        if seen < landed:
            continue
        observed = observe(None, renewed, seen)
        for now in grid:
            if now >= seen and may_take(observed, OTHER, now):
                assert not still_leading(0.0, now, settings), (landed, seen, now)


@pytest.mark.parametrize(
    ("what", "renewed_at", "now", "timeout", "allowed"),
    [
        ("just renewed, a 3.3 s write", 100.0, 100.0, 10 / 3, True),
        ("renewed 9.9 s ago: ends 13.2 s after, 1 s before 15", 100.0, 109.9, 10 / 3, True),
        ("past the renew deadline: this replica stopped acting", 100.0, 110.0, 0.1, False),
        ("a write that would end inside the margin", 100.0, 105.0, 9.5, False),
        ("one that ends exactly at the margin", 100.0, 105.0, 9.0, True),
        ("never renewed, or lost to a 409", None, 0.0, 0.1, False),
    ],
)  # fmt: skip
def test_a_write_leaves_only_if_it_ends_a_margin_before_the_lease_may_pass(
    what: str, renewed_at: float | None, now: float, timeout: float, allowed: bool
) -> None:
    settings = LeaderElection()
    assert settings.fence_margin_s == 1.0 and settings.request_timeout_s == 10 / 3
    assert may_write(renewed_at, now, timeout, settings) is allowed, what


@pytest.mark.parametrize("duration", [3.0, 4.0, 15.0, 60.0])
def test_a_write_that_passes_the_fence_ends_before_anyone_else_may_begin(duration: float) -> None:
    """The grid of the test above: whenever another replica may take the Lease, every
    write this replica let leave (at ``sent``, with the elected replica's timeout) has
    ended, a margin before; and the fence never refuses while the holder renews on time."""
    settings = LeaderElection(lease_duration_s=duration)
    timeout = settings.request_timeout_s
    step = duration / 40
    grid = [i * step for i in range(121)]
    renewed = Lease(LeaseRecord(ME, round(duration), T0, T1, 0), "9")
    for seen in grid[:60]:
        observed = observe(None, renewed, seen)
        taken = next(now for now in grid if now >= seen and may_take(observed, OTHER, now))
        for sent in grid:
            if may_write(0.0, sent, timeout, settings):
                assert sent + timeout + settings.fence_margin_s <= taken, (seen, sent)
    assert may_write(0.0, settings.retry_period_s * 2, timeout, settings)
