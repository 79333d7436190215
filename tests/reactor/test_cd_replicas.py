"""Two ``fleetwatch reactor`` processes on one PostgreSQL, acting on the Flux and Argo CD
objects of a stand-in management cluster (another process) one at a time (docs/cd.md,
"Several replicas"): an outage notification to the replica that does not act pauses the
objects once; kill -9 of the acting one mid-outage; the other takes over within a lease
duration; the recovery resumes exactly those; every object is patched as often as with
one replica."""

from __future__ import annotations

import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_cd_live import C1_PAUSED, FLEET, OBJECTS, SERVER

from fleetwatch.common import metricnames
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin.management import ManagementProcess
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.cd.objects import MARK, SKIP_RECONCILE
from reactor.service import Service
from reactor.store.postgres import PostgresStore
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook
from tests.helpers.reactor_postgres import PostgresServer

pytestmark = pytest.mark.live

#: Short, so the test waits seconds, not the default's 15 s; the rules scale with it.
LEASE_DURATION_S = 4.0
RETRY_S = LEASE_DURATION_S * 2 / 15


class Replica:
    """One ``fleetwatch reactor`` process with ``--cd.flux --cd.argocd`` (or ``cd``)."""

    def __init__(
        self,
        folder: Path,
        db_url: str,
        kubeconfig: Path,
        name: str,
        cd: tuple[str, ...] = ("--cd.flux", "--cd.argocd"),
    ) -> None:
        port = free_port()
        self.name = name
        self.base = f"http://127.0.0.1:{port}"
        self.proc = ManagedProcess(
            [
                sys.executable, "-m", "fleetwatch.cli", "reactor",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--db.url={db_url}",
                f"--kubeconfig={folder / 'none'}",
                *cd,
                f"--cd.kubeconfig={kubeconfig}",
                "--cd.leader-election.namespace=default",
                f"--cd.leader-election.lease-duration={LEASE_DURATION_S:g}",
                "--log.level=info",
            ],
            folder / f"{name}.log",
            ready_url=f"{self.base}/-/ready",
        )  # fmt: skip

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    def sample(self, name: str) -> float | None:
        with urllib.request.urlopen(f"{self.base}/metrics", timeout=30) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name:
                    return sample.value
        return None

    def acts(self) -> bool:
        return self.sample(metricnames.REACTOR_CD_LEADER) == 1


@pytest.fixture
def mgmt(tmp_path: Path) -> Iterator[ManagementProcess]:
    with ManagementProcess(tmp_path / "mgmt", bookmark_seconds=0.5) as process:
        yield process


def cluster(name: str) -> dict[str, str]:
    """A cluster as discovery names it (by its Secret)."""
    ref = f"secret://flux-system/{name}-kubeconfig"
    return {"name": name, "endpoint": SERVER[name], "kubeconfig_secret_ref": ref}


def seed_store(url: str) -> None:
    """c1, ONLINE."""
    store = PostgresStore(url)
    service = Service(store)
    service.add_cluster("c1", SERVER["c1"], cluster("c1")["kubeconfig_secret_ref"])
    online = webhook(alert(ONLINE, "c1", 0))
    service.apply_signals(status_signals(parse_webhook(json.dumps(online).encode())).signals)
    store.close()


def reader(mgmt: ManagementProcess) -> Callable[[str], tuple[bool, str | None]]:
    """(paused, fleetwatch's mark) of a seeded object, read through the API over HTTPS."""
    context = ssl.create_default_context(cafile=str(mgmt.ca_file))

    def state(name: str) -> tuple[bool, str | None]:
        seeded = OBJECTS[name]
        kind = BY_API_KIND[(seeded["apiVersion"], seeded["kind"])]
        ns = seeded["metadata"]["namespace"]
        url = f"{mgmt.url}/apis/{kind.group}/{kind.version}/namespaces/{ns}/{kind.plural}/{name}"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {mgmt.token}"})
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            found = json.load(resp)
        notes = found["metadata"].get("annotations") or {}
        if found["kind"] == "Application":
            return notes.get(SKIP_RECONCILE) == "true", notes.get(MARK)
        return found["spec"].get("suspend") is True, notes.get(MARK)

    return state


def test_one_replica_acts_and_the_other_takes_over_within_seconds_of_its_death(
    tmp_path: Path, postgres_server: PostgresServer, mgmt: ManagementProcess
) -> None:
    url = postgres_server.create_database("cdreplicas")
    seed_store(url)
    mgmt.seed(FLEET)
    state = reader(mgmt)
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
