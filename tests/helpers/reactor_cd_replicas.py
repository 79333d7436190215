"""``fleetwatch reactor`` processes with the CD integration on one PostgreSQL, acting on a
stand-in management cluster in a process of its own: the replicas of the tests of several
replicas, the dry run and the fence (docs/cd.md, "Several replicas").

Before, ``test_cd_replicas.py`` held them and the other two imported it as a library.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetwatch.common import metricnames
from fleetwatch.procs import ManagedProcess, free_port
from fleetwatch.standin.management import ManagementProcess
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor.alertmanager.signals import parse_webhook, status_signals
from reactor.service import Service
from reactor.store.postgres import PostgresStore
from tests.helpers.commands import FLEETWATCH
from tests.helpers.reactor_cd import OBJECTS, SERVER, flux_ref, paused_and_mark
from tests.helpers.reactor_live import call, metric_sample
from tests.helpers.reactor_payloads import ONLINE, alert, webhook

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
                *FLEETWATCH, "reactor",
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
        return call(self.base + path, method, body)

    def sample(self, name: str, **labels: str) -> float | None:
        """One sample of its /metrics, by name and labels."""
        return metric_sample(self.base, name, **labels)

    def acts(self) -> bool:
        return self.sample(metricnames.REACTOR_CD_LEADER) == 1


def cluster(name: str) -> dict[str, str]:
    """A cluster as discovery names it (by its Secret)."""
    return {"name": name, "endpoint": SERVER[name], "kubeconfig_secret_ref": flux_ref(name)}


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
            return paused_and_mark(json.load(resp))

    return state


#: The ``cd_fleet`` fixture (tests/reactor/conftest.py): the store's URL (c1 ONLINE), the
#: management cluster with the fleet of ``reactor_cd``, and a reader of its objects.
CdFleet = tuple[str, ManagementProcess, Callable[[str], tuple[bool, str | None]]]
