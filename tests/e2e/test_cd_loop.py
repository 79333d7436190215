"""The CD integration through the whole loop, every part real: a workload cluster goes down,
Prometheus' rule fires FleetClusterOffline after N failed probes, Alertmanager notifies
the reactor, and the reactor suspends that cluster's Flux Kustomizations and HelmRelease
and pauses its Argo CD Application in the stand-in management cluster; the cluster comes
back and exactly those are resumed. A Kustomization suspended by hand before stays
suspended, and another cluster's objects are never written.

The clusters reach the exporter and the reactor as the management cluster's Secrets
(``--discovery.kubernetes``): Cluster API's, which the Flux objects name, and Argo CD's
cluster Secrets, by whose ``name`` the Applications name them (Argo CD reads no other;
discovery keeps Argo CD's and makes Cluster API's its alias, ``docs/cd.md``). The
reactor's resync is left at its default (60 s): what happens here is the notification's
doing, not a resync's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleetwatch.cli.demo_cd import (
    ObjectReader,
    application,
    argocd_cluster_secret,
    cluster_secret,
    flux_object,
    mirrored_name,
)
from fleetwatch.standin import ThreadedFleet
from fleetwatch.standin.management import ManagementSettings, ThreadedManagementCluster
from tests.helpers.e2e_loop import INTERVAL, Loop

pytestmark = pytest.mark.live

DOWN, OTHER = "cd-down", "cd-other"
#: cd-down's objects fleetwatch must pause and resume, and the one a person paused.
PAUSED = (
    "Kustomization cd-down/apps",
    "HelmRelease cd-down/podinfo",
    "Application argocd/cd-down-web",
)
HELD = "Kustomization cd-down/held"
#: The other cluster's: never written.
UNTOUCHED = ("Kustomization cd-other/apps", "Application argocd/cd-other-web")


#: What the management cluster holds of each cluster (the Secrets aside).
ON_DOWN = [
    flux_object("Kustomization", DOWN, "apps"),
    flux_object("Kustomization", DOWN, "held", suspended=True),
    flux_object("HelmRelease", DOWN, "podinfo"),
    application(DOWN, "cd-down-web"),
]
ON_OTHER = [flux_object("Kustomization", OTHER, "apps"), application(OTHER, "cd-other-web")]


class CdLoop(Loop):
    """The loop with the clusters read from the management cluster's Secrets and the
    reactor acting on its Flux and Argo CD objects."""

    def __init__(self, root: Path, fleet: ThreadedFleet, mgmt: ThreadedManagementCluster) -> None:
        super().__init__(root, fleet)
        self.mgmt = mgmt
        self.process_kubeconfig = root / "empty-kubeconfig.yaml"
        self.exporter_extra = [
            "--discovery.kubernetes",
            f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}",
        ]
        cd = ["--cd.flux", "--cd.argocd", f"--cd.kubeconfig={mgmt.kubeconfig}"]
        self.reactor_extra = [*self.exporter_extra, *cd]

    def start_reactor(self) -> None:
        empty = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n"
        self.process_kubeconfig.write_text(empty)
        secrets = []
        for name in (DOWN, OTHER):
            path = self.fleet.write_kubeconfig(self.root / f"{name}.yaml", [name])
            secrets.append(cluster_secret(name, path.read_text()))
            secrets.append(argocd_cluster_secret(name, path.read_text()))
        self.mgmt.seed(secrets)
        super().start_reactor()


@pytest.fixture
def cd_loop(tmp_path: Path, fleet: ThreadedFleet) -> Iterator[CdLoop]:
    settings = ManagementSettings(bookmark_seconds=1.0)
    with ThreadedManagementCluster(tmp_path / "mgmt", settings) as mgmt:
        loop = CdLoop(tmp_path / "loop", fleet, mgmt)
        try:
            loop.start([DOWN, OTHER])
            yield loop
        finally:
            loop.stop()


def test_a_cluster_down_pauses_its_objects_and_its_return_resumes_exactly_those(
    cd_loop: CdLoop, record_timing: Callable[[str, float, float | None], None]
) -> None:
    loop, mgmt = cd_loop, cd_loop.mgmt
    reader = ObjectReader(mgmt.kubeconfig)

    def seen() -> dict[str, tuple[bool, str | None]]:
        return {o.label: (o.paused, o.mark) for o in reader.objects()}

    for name in (DOWN, OTHER):
        loop.wait_cluster(name, "ONLINE")  # discovered from its Secret, probed, ONLINE
    mgmt.seed([*ON_DOWN, *ON_OTHER])
    on_down = {mirrored_name(o) for o in ON_DOWN}
    mirrored = on_down | {mirrored_name(o) for o in ON_OTHER}
    loop.wait(lambda: mirrored <= set(loop.apps()), "the objects mirrored as apps")
    before = seen()
    assert before[HELD] == (True, None)
    assert {before[label] for label in (*PAUSED, *UNTOUCHED)} == {(False, None)}
    assert {k: n for k, n in mgmt.counts().items() if k.startswith("patch ")} == {}

    down_at = loop.set_mode(DOWN, "down")
    loop.wait(
        lambda: all(seen()[label][0] for label in PAUSED),
        f"{DOWN}'s objects paused",
    )
    record_timing(
        "cd: down -> its objects paused", time.monotonic() - down_at, loop.threshold * INTERVAL
    )
    during = seen()
    mark = during[PAUSED[0]][1]
    assert mark is not None and mark.isdigit(), during  # the outage's id, on all three
    assert {during[label] for label in PAUSED} == {(True, mark)}
    assert during[HELD] == (True, None)  # a person's pause: left alone, never marked
    assert {during[label] for label in UNTOUCHED} == {(False, None)}
    # The loop did it: Prometheus fired, Alertmanager delivered, the reactor degraded.
    proxy = loop.proxy
    assert proxy is not None
    assert ("FleetClusterOffline", DOWN, "firing") in proxy.forwarded_alerts()
    assert loop.cluster_status(DOWN) == "OFFLINE"
    apps = loop.apps()
    assert {n: apps[n][0] for n in mirrored} == {
        n: "DEGRADED" if n in on_down else "DEPLOYED" for n in mirrored
    }

    # The end of the old ONLINE reached the reactor before the cluster comes back: a
    # resolve and a re-fire inside one group_interval are never sent (test_story).
    loop.wait_delivered("FleetClusterOnline", DOWN, "resolved")
    up_at = loop.set_mode(DOWN, "ok")
    loop.wait(
        lambda: all(seen()[label] == (False, None) for label in PAUSED),
        f"{DOWN}'s objects resumed",
        timeout=60.0,  # the ONLINE's notification, on a loaded machine (seen at 30 s: 3 in 20)
    )
    record_timing("cd: up -> exactly those resumed", time.monotonic() - up_at, INTERVAL)
    assert seen() == before  # as before the outage: the one held by hand still suspended
    # Each of the three patched twice (paused, resumed); nothing else written.
    patches = {k: n for k, n in mgmt.counts().items() if k.startswith("patch ")}
    assert patches == {
        "patch kustomizations.kustomize.toolkit.fluxcd.io": 2,
        "patch helmreleases.helm.toolkit.fluxcd.io": 2,
        "patch applications.argoproj.io": 2,
    }
    loop.wait(
        lambda: {loop.apps()[n][0] for n in mirrored} == {"DEPLOYED"}, "every mirrored app DEPLOYED"
    )
