"""The fence, live (docs/cd.md, "Several replicas, one acts at a time"). The client: a patch
whose guard refuses never reaches the API server, one whose guard lets it go lands, the
guard asked once per request. Then two ``fleetwatch
reactor`` processes on one PostgreSQL, 300 Flux Kustomizations on the stand-in management
cluster (another process), lease 4 s. The outage opens; the acting replica is frozen
(SIGSTOP) in the middle of its pauses; the recovery goes through the other replica, which
takes the Lease and resumes what was paused; then the frozen one is woken (SIGCONT) with
its remaining pauses still queued. None of its writes may land after it woke (the
stand-in's audit log says who wrote what, each replica with its own token), and every
object ends resumed."""

from __future__ import annotations

import json
import signal
import ssl
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwatch.common import metricnames
from fleetwatch.discovery.kubecreds import from_kubeconfig
from fleetwatch.procs import wait_until
from fleetwatch.standin.management import ManagementCluster, ManagementProcess
from reactor.cd.kubewrite import Fenced, KubeWriter
from reactor.cd.objects import MARK
from tests.helpers.reactor_cd import kustomization
from tests.helpers.reactor_cd_replicas import Replica, seed_store
from tests.helpers.reactor_payloads import OFFLINE, ONLINE, alert, webhook
from tests.helpers.reactor_postgres import PostgresServer

pytestmark = pytest.mark.live

OBJECTS = 300
KS = "kustomizations.kustomize.toolkit.fluxcd.io"
LIST = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations"
FENCED = metricnames.total(metricnames.REACTOR_CD_FENCED)


def kubeconfig_of(mgmt: ManagementProcess, user: str, path: Path) -> Path:
    """The stand-in's kubeconfig with a token of ``user`` of its own: the audit log tells
    the replicas apart by it."""
    config = yaml.safe_load(mgmt.kubeconfig.read_text())
    for entry in config["users"]:
        entry["user"] = {"token": mgmt.issue_token(user)}
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def states(mgmt: ManagementProcess) -> dict[str, tuple[bool, str | None]]:
    """(suspended, fleetwatch's mark) of every Kustomization, in one list."""
    context = ssl.create_default_context(cafile=str(mgmt.ca_file))
    headers = {"Authorization": f"Bearer {mgmt.token}"}
    request = urllib.request.Request(mgmt.url + LIST, headers=headers)
    with urllib.request.urlopen(request, timeout=10, context=context) as resp:
        items: list[dict[str, Any]] = json.load(resp)["items"]
    return {
        o["metadata"]["name"]: (
            o["spec"].get("suspend") is True,
            (o["metadata"].get("annotations") or {}).get(MARK),
        )
        for o in items
    }


async def test_a_patch_leaves_only_if_its_guard_lets_it_go(mgmt: ManagementCluster) -> None:
    (seeded,) = mgmt.seed([kustomization("apps", "c1")])
    path = f"{LIST}/apps"
    asked: list[str] = []

    def guard(refuse: bool) -> Any:
        async def check() -> None:
            asked.append("refused" if refuse else "let go")
            if refuse:
                raise Fenced("lease", "this replica's Lease may have expired")

        return check

    api = KubeWriter(from_kubeconfig([mgmt.kubeconfig], "test"))
    async with api:
        patch = {"metadata": {"resourceVersion": seeded["metadata"]["resourceVersion"]}}
        patch["spec"] = {"suspend": True}
        with pytest.raises(Fenced) as fenced:
            await api.merge_patch(path, patch, guard(True), timeout=5)
        assert fenced.value.reason == "lease"
        assert mgmt.counts().get(f"patch {KS}", 0) == 0 and mgmt.audit() == []
        written = await api.merge_patch(path, patch, guard(False), timeout=5)
        assert written["spec"]["suspend"] is True
        assert mgmt.counts()[f"patch {KS}"] == 1 and asked == ["refused", "let go"]
        # The connection the refused patch had taken was closed unused; the client goes on.
        assert (await api.list(LIST, {}))["items"][0]["spec"]["suspend"] is True


def test_a_replica_frozen_mid_pause_writes_nothing_once_woken_and_all_ends_resumed(
    tmp_path: Path, postgres_server: PostgresServer, management_process: ManagementProcess
) -> None:
    mgmt = management_process
    url = postgres_server.create_database("cdfence")
    seed_store(url)
    mgmt.seed([kustomization(f"ks{i:03d}", "c1") for i in range(OBJECTS)])
    users = [f"replica{i}" for i in range(2)]
    replicas = [
        Replica(tmp_path, url, kubeconfig_of(mgmt, u, tmp_path / f"{u}.kubeconfig"), u)
        for u in users
    ]
    frozen: Replica | None = None
    try:
        for replica in replicas:
            replica.proc.start()
        wait_until(lambda: sum(r.acts() for r in replicas) == 1, 30, what="one replica acts")
        acting, other = replicas if replicas[0].acts() else replicas[::-1]
        wait_until(lambda: len(acting.call("GET", "/apps")[1]) == OBJECTS, 30, what="mirrored")

        # Each pause takes 50 ms at the server, so the 300 (16 at a time) take about a
        # second: long enough to freeze the acting replica in their middle.
        mgmt.arm_fault(kind="delay", verb="patch", resource=KS, delay_seconds=0.05)
        assert acting.call("POST", "/alerts", webhook(alert(OFFLINE, "c1", 5)))[0] == 200

        def some_paused() -> int:
            count = sum(paused for paused, _ in states(mgmt).values())
            return count if 0 < count < OBJECTS // 2 else 0

        wait_until(some_paused, 20, interval=0.01, what="some but not all paused")
        acting.proc.signal(signal.SIGSTOP)
        frozen = acting
        mgmt.clear_faults()
        paused_when_frozen = sum(p for p, _ in states(mgmt).values())
        assert 0 < paused_when_frozen < OBJECTS, paused_when_frozen

        # The recovery, through the other replica: it takes the Lease once it expires and
        # resumes what the frozen one paused.
        assert other.call("POST", "/alerts", webhook(alert(ONLINE, "c1", 10)))[0] == 200
        wait_until(other.acts, 30, what="the other replica acts")
        wait_until(
            lambda: all(s == (False, None) for s in states(mgmt).values()), 30, what="resumed"
        )
        woken_at = time.time()
        acting.proc.signal(signal.SIGCONT)
        frozen = None

        # Woken with its remaining pauses queued: its batch ends (one line per result)...
        batch_done = "cd: cluster c1: pause"
        wait_until(lambda: batch_done in acting.proc.log_tail(400), 30, what="its batch ended")
        wait_until(lambda: acting.sample(metricnames.REACTOR_CD_LEADER) == 0, 15)
        assert other.acts()
        # ... and nothing of it landed after it woke: each pause was fenced, not sent.
        audit = mgmt.audit()
        late = [e for e in audit if e["user"] == acting.name and e["received"] >= woken_at]
        assert not [e for e in late if 200 <= e["code"] < 300], late  # no write landed
        assert not [e for e in late if e["resource"] == KS], late  # no patch even left
        assert not [e for e in late if e["resource"] == "events.events.k8s.io"], late
        fenced = acting.sample(FENCED, reason="lease") or 0.0
        assert fenced > 0 and "not sent: this replica's Lease" in acting.proc.log_tail(400)
        # Every object ends resumed, and stays so.
        assert all(s == (False, None) for s in states(mgmt).values())
        landed = [e for e in audit if e["user"] == acting.name and e["resource"] == KS]
        print(
            f"paused {paused_when_frozen} of {OBJECTS} when frozen ({len(landed)} "
            f"patches of the frozen replica landed before it froze); "
            f"{fenced:g} fenced once woken, {len(late)} late write(s), all refused"
        )
    finally:
        if frozen is not None:
            frozen.proc.signal(signal.SIGCONT)
        for replica in replicas:
            replica.proc.stop()
    for replica in replicas:
        assert "Traceback" not in replica.proc.log_tail(400), replica.proc.log_tail(400)
