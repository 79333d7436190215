"""Fixtures of the etcd and control-plane tests: one real 3-member etcd cluster per module."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from etcdcluster import EtcdCluster

T = TypeVar("T")


@pytest.fixture(scope="module")
def etcd_cluster() -> Iterator[EtcdCluster]:
    """Shared by the tests of one module: starting three members costs 0.2-2.7 s.

    The data dirs live in a folder of our own, not pytest's numbered basetemp, which a
    concurrent pytest run may rotate away under a running etcd.
    """
    with tempfile.TemporaryDirectory(prefix="fleetwatch-etcd-") as root:
        cluster = EtcdCluster(Path(root)).start()
        try:
            yield cluster
        finally:
            cluster.stop()


async def poll(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    within: float,
    what: str,
) -> T:
    """Call ``probe`` until ``accept`` likes its answer; fail with the last answer seen.

    The async twin of ``fleetwatch.procs.wait_until``, for tests whose servers share the
    event loop (a blocking poll would starve them).
    """
    deadline = time.monotonic() + within
    last: object = None
    while True:
        try:
            value = await probe()
        except Exception as exc:  # a server still starting refuses: "not yet"
            last = exc
        else:
            if accept(value):
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not seen within {within:.0f}s; last: {last!r}")
        await asyncio.sleep(0.1)  # poll interval, not a synchronisation
