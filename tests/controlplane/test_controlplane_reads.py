"""How often the control-plane check reads kube-system, and that skipping changes nothing seen.

The check reads two pod lists per cluster; ``--controlplane.interval`` lets it publish its
last report for a few probes instead. A skipped read must give exactly what a read would
have given while kube-system did not change, and a failed probe or read must make the
next successful probe read again.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from exporter.controlplane.check import ControlPlaneCheck, reads_every
from exporter.controlplane.report import only
from exporter.model import UNCHANGED, CheckResult, ProbeResult, Reason, Unchanged
from fleetwatch.discovery import Cluster
from fleetwatch.standin.workload.controlplane import ControlPlane, pod_list

OK = ProbeResult(True, None, 0.01, 200)
DOWN = ProbeResult(False, Reason.CONNECT, 0.01)


class Api:
    """kube-system of one stand-in control plane, answering the check's GETs; counts reads."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.pod_reads = 0
        self.fail = False

    async def get(self, path: str, timeout: float) -> tuple[int, bytes]:  # noqa: ASYNC109
        if self.fail:
            return 500, b"{}"
        self.pod_reads += 1
        selector = unquote(path.partition("labelSelector=")[2])
        return 200, json.dumps(pod_list(self.plane, 0, selector)).encode()


def cluster(name: str = "prod") -> Cluster:
    return Cluster(name, "https://127.0.0.1:6443", "/kubeconfig", name)


class Shown:
    """What the exporter shows of a check's answers, as the cluster table resolves an
    :class:`Unchanged` (with the plain result where the table keeps its encoding)."""

    def __init__(self) -> None:
        self.last: CheckResult | None = None

    def __call__(self, outcome: CheckResult | Unchanged | None) -> CheckResult | None:
        if isinstance(outcome, Unchanged):
            last = self.last
            return last if last is None or outcome.only is None else only(last, outcome.only)
        if outcome is not None:
            self.last = outcome
        return outcome


def samples(result: CheckResult | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of a result, by name and labels."""
    assert result is not None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in result.samples}


@pytest.mark.parametrize(
    ("controlplane", "probe", "every"),
    [(0, 15, 1), (10, 15, 1), (15, 15, 1), (60, 15, 4), (50, 15, 4), (61, 15, 5)],
)
def test_reads_every(controlplane: float, probe: float, every: int) -> None:
    assert reads_every(controlplane, probe) == every


def test_reads_every_refuses_a_negative_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        reads_every(-1, 15)


async def test_by_default_every_probe_reads_and_an_unchanged_answer_is_the_same_result() -> None:
    api, check = Api(ControlPlane()), ControlPlaneCheck()
    first = await check.run(cluster(), api, OK)  # type: ignore[arg-type]
    second = await check.run(cluster(), api, OK)  # type: ignore[arg-type]
    assert api.pod_reads == 4  # two lists, twice
    assert isinstance(first, CheckResult)
    assert second is UNCHANGED  # same pods: the same result, not rebuilt
    api.plane = api.plane.with_etcd_ready("cp-2", False)
    third = await check.run(cluster(), api, OK)  # type: ignore[arg-type]
    assert isinstance(third, CheckResult)
    assert samples(third)[("fleetwatch_etcd_members_healthy", ())] == 2
    assert samples(first)[("fleetwatch_etcd_members_healthy", ())] == 3


async def test_every_kth_probe_reads_and_publishes_the_same_in_between() -> None:
    api, check = Api(ControlPlane()), ControlPlaneCheck(every=4)
    fresh = ControlPlaneCheck()  # reads every time: what a user would see without the flag
    results, shown = [], Shown()
    for _ in range(13):
        results.append(shown(await check.run(cluster(), api, OK)))  # type: ignore[arg-type]
    # The first probe reads; then one read per four probes, from a turn of its own.
    reads = api.pod_reads // 2
    assert 1 + 12 // 4 - 1 <= reads <= 1 + 12 // 4
    expected = await fresh.run(cluster(), Api(ControlPlane()), OK)  # type: ignore[arg-type]
    assert all(samples(r) == samples(expected) for r in results)
    assert expected is not None and expected.targets
    assert all(r is not None and r.targets == expected.targets for r in results)


async def test_a_failed_probe_or_read_makes_the_next_probe_read() -> None:
    api, check, shown = Api(ControlPlane()), ControlPlaneCheck(every=1000), Shown()
    shown(await check.run(cluster(), api, OK))  # type: ignore[arg-type]
    back_then = shown(await check.run(cluster(), api, OK))  # type: ignore[arg-type]
    assert api.pod_reads == 2 or api.pod_reads == 4  # the second read depends on the turn
    before = api.pod_reads
    down = shown(await check.run(cluster(), api, DOWN))  # type: ignore[arg-type]
    assert not any(name.startswith("fleetwatch_etcd") for name, _ in samples(down))
    assert down is not None and back_then is not None
    assert down.targets == back_then.targets  # the targets are still served, and their samples
    assert {k: v for k, v in samples(back_then).items() if "localhost_only" in k[0]} == samples(
        down
    )
    api.plane = api.plane.with_coredns_nodes("cp-1", "cp-2")  # changed while it was down
    back = shown(await check.run(cluster(), api, OK))  # type: ignore[arg-type]
    assert api.pod_reads == before + 2
    assert back is not None and samples(back)[("fleetwatch_coredns_nodes", ())] == 2
    shown(await check.run(cluster(), api, DOWN))  # type: ignore[arg-type]
    api.fail = True  # the read after it fails (HTTP 500): no kube-system view this time
    failed = shown(await check.run(cluster(), api, OK))  # type: ignore[arg-type]
    assert failed is not None and ("fleetwatch_coredns_nodes", ()) not in samples(failed)
    api.fail = False
    reads = api.pod_reads
    await check.run(cluster(), api, OK)  # type: ignore[arg-type]
    assert api.pod_reads == reads + 2
