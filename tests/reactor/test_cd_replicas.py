"""Two ``fleetwatch reactor`` processes on one PostgreSQL, acting on the Flux and Argo CD
objects of a stand-in management cluster (another process) one at a time (docs/cd.md,
"Several replicas"): an outage notification to the replica that does not act pauses the
objects once; kill -9 of the acting one mid-outage; the other takes over within a lease
duration; the recovery resumes exactly those; every object is patched as often as with
one replica."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleetwatch.common import metricnames
from fleetwatch.procs import wait_until
from tests.helpers.reactor_cd import C1_PAUSED
from tests.helpers.reactor_cd_replicas import LEASE_DURATION_S, RETRY_S, CdFleet, Replica, cluster
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook

pytestmark = pytest.mark.live


def test_one_replica_acts_and_the_other_takes_over_within_seconds_of_its_death(
    tmp_path: Path, cd_fleet: CdFleet
) -> None:
    url, mgmt, state = cd_fleet
    replicas = [Replica(tmp_path, url, mgmt.kubeconfig, f"replica{i}") for i in range(2)]
    try:
        for replica in replicas:  # ready: both have listed the objects
            replica.proc.start()
        wait_until(lambda: sum(r.acts() for r in replicas) == 1, 30, what="one replica acts")
        acting, waiting = replicas if replicas[0].acts() else replicas[::-1]
        wait_until(lambda: len(acting.call("GET", "/apps")[1]) == 6, 30, what="c1's objects")
        # A cluster added through the replica that does not act: the acting one mirrors
        # its objects within seconds (the resync is a minute away: the store's stamp).
        assert waiting.call("POST", "/clusters", cluster("c2"))[0] == 201
        wait_until(lambda: len(acting.call("GET", "/apps")[1]) == 8, 20, what="c2's objects")

        # The outage reaches the replica that does not act: the acting one learns it from
        # the store (its outage stamp, polled every second) and pauses the objects.
        notified = time.monotonic()
        code, _ = waiting.call("POST", "/alerts", webhook(alert(OFFLINE, "c1", 5)))
        assert code == 200
        wait_until(lambda: all(state(n)[0] and state(n)[1] for n in C1_PAUSED), 15, what="paused")
        paused_in = time.monotonic() - notified
        assert state("held") == (True, None) and state("other") == (False, None)

        # kill -9 of the acting one, mid-outage: the other takes over within a lease
        # duration and two of its tries.
        killed = time.monotonic()
        acting.proc.kill()
        wait_until(waiting.acts, 30, what="the other replica acts")
        handover = time.monotonic() - killed
        # halfway between one lease duration and two: a loaded machine's slack is 2 s
        assert handover <= 1.5 * LEASE_DURATION_S + 2 * RETRY_S * 1.2, handover
        taken = metricnames.total(metricnames.REACTOR_CD_LEADER_TRANSITIONS)
        assert waiting.sample(taken) == 1

        # The recovery resumes exactly what the outage paused.
        code, _ = waiting.call("POST", "/alerts", webhook(alert(ONLINE, "c1", 10)))
        assert code == 200
        wait_until(lambda: all(state(n) == (False, None) for n in C1_PAUSED), 15, what="resumed")
        assert state("held") == (True, None)  # a person's pause, never resumed
        assert state("other") == (False, None) and state("away") == (False, None)
        # Each object patched as often as with one replica: paused once, resumed once.
        patches = {k: n for k, n in mgmt.counts().items() if k.startswith("patch ")}
        assert patches == {
            "patch kustomizations.kustomize.toolkit.fluxcd.io": 4,
            "patch helmreleases.helm.toolkit.fluxcd.io": 2,
            "patch applications.argoproj.io": 4,
        }
        apps = {a["name"]: a["status"] for a in waiting.call("GET", "/apps")[1]}
        assert set(apps.values()) == {"DEPLOYED"} and len(apps) == 8
    finally:
        for replica in replicas:
            replica.proc.stop()
    print(f"paused {paused_in:.2f} s after the notification; handed over in {handover:.2f} s")
    for replica in replicas:
        assert "Traceback" not in replica.proc.log_tail(400), replica.proc.log_tail(400)
