"""Leader election (reactor.cd.election) against the stand-in management cluster's Leases:
one of two replicas holds the Lease, the other takes over within a lease duration when
the holder is cut off (and not before the holder stopped acting), at its next try after
a release, and a Lease it may not write is counted and acts for nobody."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from fleetwatch.common import metricnames
from fleetwatch.discovery.kubecreds import from_kubeconfig
from fleetwatch.kube.kubeapi import KubeApiError
from fleetwatch.kube.kubeauth import BearerToken
from fleetwatch.standin.management import ManagementCluster, ManagementSettings
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor.cd.election import LeaderElector, LeaderMetrics, lease_namespace
from reactor.cd.kubewrite import KubeWriter
from reactor.cd.lease import LeaderElection

pytestmark = pytest.mark.live

SETTINGS = LeaderElection(namespace="default", name="fleetwatch-reactor-cd", lease_duration_s=3)
LEASE_KIND = BY_API_KIND[("coordination.k8s.io/v1", "Lease")]


class Partition:
    """Our own seam (``reactor.cd.election.LeaseClient``): the real client, or, while
    ``cut``, a network failure, as for a replica cut off from the management API."""

    def __init__(self, api: KubeWriter) -> None:
        self.api = api
        self.cut = False

    async def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        if self.cut:
            raise KubeApiError(0, "network", "cut off")
        return await self.api.send(method, path, body, **options)


class Replica:
    def __init__(self, name: str, api: KubeWriter) -> None:
        self.client = Partition(api)
        self.registry = CollectorRegistry()
        self.elector = LeaderElector(
            self.client, SETTINGS, "default", LeaderMetrics(self.registry), identity=name
        )
        #: (time, acting) of each change the listeners heard
        self.changes: list[tuple[float, bool]] = []
        self.elector.listeners.append(
            lambda acting: self.changes.append((time.monotonic(), acting))
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(), name=f"elector-{self.elector.identity}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


@pytest.fixture
def mgmt_settings() -> ManagementSettings:
    """The stand-in's own defaults (tests/helpers/standin_fixtures.py gives the ``mgmt``)."""
    return ManagementSettings()


@pytest.fixture
async def api(mgmt: ManagementCluster) -> AsyncIterator[KubeWriter]:
    async with KubeWriter(from_kubeconfig([mgmt.kubeconfig], "test")) as client:
        yield client


@pytest.fixture
async def pair(api: KubeWriter) -> AsyncIterator[tuple[Replica, Replica]]:
    replicas = (Replica("reactor-a", api), Replica("reactor-b", api))
    for replica in replicas:
        replica.start()
    yield replicas
    for replica in replicas:
        await replica.stop()


async def until(check: Callable[[], bool], within: float = 10.0) -> float:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.01)
    return time.monotonic()


def lease(mgmt: ManagementCluster) -> dict[str, Any]:
    found: dict[str, Any] = mgmt.state.store.get(LEASE_KIND, "default", "fleetwatch-reactor-cd")
    return found["spec"]


async def test_one_holds_the_lease_and_the_other_takes_over_after_it_is_cut_off(
    pair: tuple[Replica, Replica], mgmt: ManagementCluster
) -> None:
    await until(lambda: any(r.elector.is_leader() for r in pair))
    holder, other = pair if pair[0].elector.is_leader() else pair[::-1]
    await until(lambda: holder.sample(metricnames.REACTOR_CD_LEADER) == 1)
    spec = lease(mgmt)
    assert spec["holderIdentity"] == holder.elector.identity
    assert (spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (3, 0)
    assert spec["acquireTime"] and spec["renewTime"]
    # Renewals keep it; the other waits, reading it every retry period.
    first_renewal = spec["renewTime"]
    await until(lambda: lease(mgmt)["renewTime"] != first_renewal)
    assert not other.elector.is_leader() and other.sample(metricnames.REACTOR_CD_LEADER) == 0

    cut_at = time.monotonic()
    holder.client.cut = True
    taken_at = await until(other.elector.is_leader, within=SETTINGS.lease_duration_s + 3)
    stopped = [t for t, acting in holder.changes if not acting]
    assert stopped and stopped[0] <= taken_at, "the holder stopped acting before the take-over"
    assert not holder.elector.is_leader()
    # Within a lease duration and two tries of the last renewal the other saw.
    assert taken_at - cut_at <= SETTINGS.lease_duration_s + 2 * SETTINGS.retry_period_s * 1.2
    assert lease(mgmt)["holderIdentity"] == other.elector.identity
    assert lease(mgmt)["leaseTransitions"] == 1
    assert other.sample(metricnames.total(metricnames.REACTOR_CD_LEADER_TRANSITIONS)) == 1
    assert holder.sample(metricnames.total(metricnames.REACTOR_CD_LEASE_FAILURES), reason="network")

    # Back on the network, the old holder reads the Lease (the new holder only renews, with
    # no read) and does not take it back.
    reads = "get leases.coordination.k8s.io"
    before = mgmt.counts()[reads]
    holder.client.cut = False
    await until(lambda: mgmt.counts()[reads] >= before + 2)
    assert other.elector.is_leader() and not holder.elector.is_leader()
    assert lease(mgmt)["leaseTransitions"] == 1


async def test_a_released_lease_is_taken_at_the_next_try(
    pair: tuple[Replica, Replica], mgmt: ManagementCluster
) -> None:
    await until(lambda: any(r.elector.is_leader() for r in pair))
    holder, other = pair if pair[0].elector.is_leader() else pair[::-1]
    await holder.stop()
    released_at = time.monotonic()
    await holder.elector.release()
    assert not holder.elector.is_leader() and holder.sample(metricnames.REACTOR_CD_LEADER) == 0
    taken_at = await until(other.elector.is_leader)
    assert taken_at - released_at <= SETTINGS.retry_period_s * 1.2 + 0.5  # not a lease duration
    assert lease(mgmt)["holderIdentity"] == other.elector.identity


async def test_a_lease_this_replica_may_not_write_is_counted_and_nobody_acts(
    mgmt: ManagementCluster, api: KubeWriter
) -> None:
    token = mgmt.issue_token("reactor", namespaces=["default"], verbs=["get"])
    credentials = dataclasses.replace(api.credentials, token=BearerToken(token))
    async with KubeWriter(credentials) as restricted:
        replica = Replica("reactor-a", restricted)
        for _ in range(3):
            assert await replica.elector.try_acquire_or_renew() is False
        forbidden = metricnames.total(metricnames.REACTOR_CD_LEASE_FAILURES)
        assert replica.sample(forbidden, reason="forbidden") == 3
        assert not replica.elector.is_leader()


def test_the_namespace_is_the_flags_else_the_pods_else_default(tmp_path: Path) -> None:
    pod = tmp_path / "namespace"
    assert lease_namespace(LeaderElection(namespace="ops"), pod) == "ops"
    assert lease_namespace(LeaderElection(), pod) == "default"
    pod.write_text("fleetwatch\n")
    assert lease_namespace(LeaderElection(), pod) == "fleetwatch"
