"""The reactor's discovery process (``reactor.secretlink``, ``reactor.secretchild``).

The process is real (``python -m reactor.secretchild``, as ``fleetwatch reactor`` starts
it) and lists the management stand-in's Secrets. Killed or hung, it is started again, and the
reactor keeps what it held meanwhile (its clusters, the refs it can probe, ``/-/ready``)
and never counts backwards on ``/metrics``. It ends with the reactor, whether the reactor
stops or is killed: nothing is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.procs import ManagedProcess, free_port, wait_until
from fleetwatch.standin.management import ManagementCluster, ThreadedManagementCluster
from reactor import secretlink
from reactor.apidiscovery import API_DISCOVERY, ApiDiscovery
from reactor.secretchild import Health
from reactor.secretlink import ProcessHealth, SecretsProcess
from tests.helpers.discovery_informer import SENTINEL, argocd_secret
from tests.helpers.reactor_cd import FLEET
from tests.helpers.reactor_helpers import MakeClient, db_flag, until

pytestmark = pytest.mark.live

FAST = InformerSettings(watch_seconds=(30.0, 30.0), backoff_initial=0.05, backoff_max=0.2)


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie, ended and not reaped yet, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def metric(text: str, name: str) -> float:
    return next(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and not s.labels
    )


async def reactor_with_process(
    make_client: MakeClient, mgmt: ManagementCluster
) -> tuple[TestClient[Any, Any], ApiDiscovery, SecretsProcess]:
    """A reactor app reading ``mgmt``'s Secrets through its discovery process."""
    client = await make_client(
        kubernetes=KubernetesDiscovery(kubeconfig=str(mgmt.kubeconfig), informer=FAST),
        discovery_process=True,
        discovery_debounce_s=0.05,
    )
    secrets = client.app[API_DISCOVERY]
    assert secrets is not None and isinstance(secrets.source, SecretsProcess)
    return client, secrets, secrets.source


async def test_a_killed_discovery_process_is_started_again_and_nothing_held_is_lost(
    make_client: MakeClient, mgmt: ManagementCluster, caplog: pytest.LogCaptureFixture
) -> None:
    mgmt.seed([argocd_secret(name, f"https://127.0.0.{11 + i}:6443") for i, name in
               enumerate(("a", "b", "c"))])  # fmt: skip
    client, secrets, source = await reactor_with_process(make_client, mgmt)

    async def listed() -> bool:
        got = await (await client.get("/clusters")).json()
        return (await client.get("/-/ready")).status == 200 and len(got) == 3

    await until(listed, what="the three Secrets' clusters, ready")
    held = secrets.held
    assert "secret://argocd/cluster-a" in held
    (first,) = source.pids
    # Background work: the kernel gives the reactor's threads a core first.
    assert niceness(first) == min(19, os.nice(0) + 10)
    os.kill(first, signal.SIGKILL)

    async def started_again() -> bool:
        return len(source.pids) == 2 and source.health.up

    await until(started_again, what="a new discovery process, up")
    assert not alive(first)
    assert any("the discovery process ended (exit status -9)" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    # What it held never went away: same clusters, same refs, still ready.
    assert secrets.held == held
    assert (await client.get("/-/ready")).status == 200
    mgmt.seed([argocd_secret("d", "https://127.0.0.14:6443")])

    async def four() -> bool:
        return len(await (await client.get("/clusters")).json()) == 4

    await until(four, what="a new Secret read by the new process")
    text = await (await client.get("/metrics")).text()
    assert metric(text, "fleetwatch_discovery_kubernetes_up") == 1
    assert SENTINEL not in caplog.text

    second = source.pids[-1]
    await client.close()  # the reactor stops: its discovery process ends with it
    assert not alive(second)


async def test_a_hung_discovery_process_is_killed_and_started_again(
    make_client: MakeClient,
    mgmt: ManagementCluster,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process that stops sending (SIGSTOP: as a deadlock would look) is taken as hung
    once its heartbeats stop, killed, and its successor reads on."""
    monkeypatch.setattr(secretlink, "SILENT_S", 1.5)
    monkeypatch.setattr(secretlink, "HEARTBEAT_S", 0.2)
    mgmt.seed([argocd_secret("a")])
    client, _, source = await reactor_with_process(make_client, mgmt)

    async def ready() -> bool:
        return (await client.get("/-/ready")).status == 200

    await until(ready, what="the first list")
    (hung,) = source.pids
    os.kill(hung, signal.SIGSTOP)

    async def replaced() -> bool:
        return len(source.pids) == 2 and source.health.up

    await until(replaced, what="a new discovery process, up")
    assert not alive(hung)
    assert any(f"the discovery process (pid {hung}) sent nothing for 1.5s; killing it"
               in r.getMessage() for r in caplog.records)  # fmt: skip
    mgmt.seed([argocd_secret("b", "https://127.0.0.12:6443")])

    async def two() -> bool:
        return len(await (await client.get("/clusters")).json()) == 2

    await until(two, what="a new Secret read by the new process")


def test_a_killed_reactor_leaves_no_process_behind(tmp_path: Path) -> None:
    """``fleetwatch reactor`` with discovery and the CD integration runs two processes of
    its own; SIGKILLed, both end (their stdin closes)."""
    with ThreadedManagementCluster(tmp_path / "mgmt") as mgmt:
        mgmt.seed([argocd_secret("argo-a"), *FLEET])
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "fleetwatch.cli", "reactor",
                f"--web.listen-address=127.0.0.1:{port}", db_flag(tmp_path / "fleetwatch.db"),
                "--kubeconfig=", "--discovery.kubernetes",
                f"--discovery.kubernetes.kubeconfig={mgmt.kubeconfig}",
                "--cd.flux", "--cd.argocd", f"--cd.kubeconfig={mgmt.kubeconfig}",
                "--no-cd.leader-election"]  # fmt: skip
        with ManagedProcess(argv, tmp_path / "reactor.log", ready_url=f"{url}/-/ready") as proc:
            with urllib.request.urlopen(f"{url}/clusters", timeout=5) as resp:
                assert [c["name"] for c in json.load(resp)] == ["argo-a"]
            children = [
                int(pid)
                for task in Path(f"/proc/{proc.pid}/task").iterdir()
                for pid in (task / "children").read_text().split()
            ]
            assert len(children) == 2, children
            commands = {Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[2]
                        for pid in children}  # fmt: skip
            assert commands == {b"reactor.secretchild", b"reactor.cd.objectchild"}
            os.kill(proc.pid, signal.SIGKILL)
            for child in children:
                wait_until(lambda c=child: not alive(c) or None, 15, what="its processes ended")
        text = (tmp_path / "reactor.log").read_text()
        assert SENTINEL not in text and mgmt.token not in text


def test_the_counters_go_on_across_restarts() -> None:
    """Each process counts from zero; what the reactor exports never goes back."""
    health = ProcessHealth()
    health.running = True
    health.report = Health(True, 5.0, Counter(closed=2), Counter(server_error=3), {"argocd": 1})
    health.ended()
    assert not health.up and health.kinds() == {"argocd": 1} and health.last_sync == 5.0
    health.running = True
    health.report = Health(True, 9.0, Counter(closed=1), Counter(), {"argocd": 2})
    assert health.up
    assert health.restarts() == Counter(closed=3)
    assert health.errors() == Counter(server_error=3)


@pytest.mark.parametrize("module", ["reactor.secretchild", "reactor.cd.objectchild"])
def test_started_by_hand_it_says_what_it_is_for(module: str) -> None:
    """Not a command (either child of the reactor's): run alone, it refuses in a sentence
    and reads nothing."""
    done = subprocess.run(
        [sys.executable, "-m", module],
        input=b"\x00\x00\x00\x04junk",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"started by the reactor only" in done.stderr
    assert done.stdout == b""
    # A reactor that stops before it sent its start: ended quietly.
    done = subprocess.run(
        [sys.executable, "-m", module], input=b"", capture_output=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
