"""The reactor as the cd overlays configure it, against a management cluster that grants
exactly the rendered RBAC: it pauses a cluster's objects on an outage and resumes them.

The reactor's arguments are the overlay's Deployment's (parsed by its own parser: which
kinds, where Argo CD is paused, in which namespaces the cluster Secrets are watched), and
its token holds one rule per rule of every Role and ClusterRole bound to its service
account, in the namespaces of the binding (``auth.RbacRule``). A request outside them is
refused with 403 as a real API server would, and then nothing is paused: a grant that is
missing fails this test, one too many fails tests/deploy/test_cd_rbac.py. Every write the
reactor made to the objects, as the stand-in stored it, also passes the overlay's
admission policy (cd-admission-policy, evaluated by ``deploy_policy``). The reactor
runs in this process (on SQLite) with the management cluster's kubeconfig instead of the
pod's service account; the clusters are added as discovery would name them.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.cli import build_parser
from fleetwatch.kube.informer import InformerSettings
from fleetwatch.standin.management import ManagementCluster, ManagementSettings
from fleetwatch.standin.management.auth import RbacRule
from fleetwatch.standin.management.kinds import BY_API_KIND
from reactor.app import create_app
from reactor.cd.objects import MARK, SKIP_RECONCILE
from reactor.cd.settings import cd_settings_from
from reactor.context import ReactorSettings
from tests.helpers.deploy_manifests import Obj, args_of, find, of_kind, render, workloads
from tests.helpers.deploy_policy import REACTOR as REACTOR_USER
from tests.helpers.deploy_policy import Policy
from tests.helpers.reactor_payloads import alert, webhook

pytestmark = pytest.mark.live

REACTOR = {"kind": "ServiceAccount", "name": "fleetwatch-reactor", "namespace": "fleetwatch"}
SERVER = "https://c1.test:6443"


def rbac_rules(objects: list[Obj]) -> list[RbacRule]:
    """What the rendered RBAC grants the reactor's service account, rule by rule."""
    rules = []
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for binding in of_kind(objects, kind):
            if REACTOR not in binding["subjects"]:
                continue
            ref = binding["roleRef"]
            namespace = binding["metadata"].get("namespace")
            if ref["kind"] == "ClusterRole":
                role = find(objects, "ClusterRole", ref["name"])
            else:
                (role,) = [
                    r
                    for r in of_kind(objects, "Role")
                    if r["metadata"]["name"] == ref["name"]
                    and r["metadata"]["namespace"] == namespace
                ]
            for rule in role["rules"]:
                resources = {
                    r if group == "" else f"{r}.{group}"
                    for group in rule["apiGroups"]
                    for r in rule["resources"]
                }
                where = None if kind == "ClusterRoleBinding" else frozenset({namespace})
                names = frozenset(rule["resourceNames"]) if "resourceNames" in rule else None
                rules.append(RbacRule(frozenset(rule["verbs"]), frozenset(resources), where, names))
    return rules


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


FLEET = [
    {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "cluster-c1",
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
        },
        "data": {"name": b64("c1"), "server": b64(SERVER), "config": b64("{}")},
    },
    {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "guestbook", "namespace": "argocd"},
        "spec": {"project": "default", "destination": {"name": "c1", "namespace": "gb"}},
    },
    {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "team-a"},
        "spec": {
            "interval": "10m",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "fleet"},
            "kubeConfig": {"secretRef": {"name": "c3-kubeconfig"}},
        },
    },
]


def paused(mgmt: ManagementCluster, doc: dict[str, Any]) -> tuple[bool, str | None]:
    kind = BY_API_KIND[(doc["apiVersion"], doc["kind"])]
    meta = doc["metadata"]
    found = mgmt.state.store.get(kind, meta["namespace"], meta["name"])
    notes = found["metadata"].get("annotations") or {}
    if doc["kind"] == "Kustomization":
        return found["spec"].get("suspend") is True, notes.get(MARK)
    return notes.get(SKIP_RECONCILE) == "true", notes.get(MARK)


async def until(check: Callable[[], bool], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.05)


async def notify(client: Any, status: str, minutes: float, *clusters: str) -> None:
    name = {"OFFLINE": "FleetClusterOffline", "ONLINE": "FleetClusterOnline"}[status]
    resp = await client.post("/alerts", json=webhook(*(alert(name, c, minutes) for c in clusters)))
    assert resp.status == 200, await resp.text()


@pytest.mark.parametrize("overlay", ["overlays/cd", "overlays/cd-cluster-secret"])
async def test_the_reactor_pauses_and_resumes_with_exactly_the_rendered_rbac(
    overlay: str, tmp_path: Path, aiohttp_client: Any
) -> None:
    objects = render(overlay)
    (reactor,) = [w for w in workloads(objects) if w["metadata"]["name"] == "fleetwatch-reactor"]
    args = args_of(reactor)
    cd = cd_settings_from(build_parser(args[0]).parse_args(args))
    assert cd is not None
    async with ManagementCluster(tmp_path / "mgmt", ManagementSettings(bookmark_seconds=0.2)) as m:
        token = m.issue_token("system:serviceaccount:fleetwatch:fleetwatch-reactor",
                              rules=rbac_rules(objects))  # fmt: skip
        cd = dataclasses.replace(
            cd,
            kubeconfig=str(m.write_kubeconfig(tmp_path / "reactor.kubeconfig", token)),
            informer=InformerSettings(backoff_initial=0.05, backoff_max=0.5),
            resync_interval_s=1.0,
        )
        if cd.leader_election is not None:  # in its pod, the namespace file says fleetwatch
            election = dataclasses.replace(cd.leader_election, namespace="fleetwatch")
            cd = dataclasses.replace(cd, leader_election=election)
            m.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleetwatch"}}])
        app = create_app(ReactorSettings(db_path=tmp_path / "reactor.db"), cd=cd)
        client = await aiohttp_client(app)
        clusters = {"c1": "secret://argocd/cluster-c1", "c3": "secret://team-a/c3-kubeconfig"}
        for name, ref in clusters.items():
            body = {"name": name, "endpoint": f"https://{name}.test:6443",
                    "kubeconfig_secret_ref": ref}  # fmt: skip
            assert (await client.post("/clusters", json=body)).status == 201
        m.seed(FLEET)
        seeded = m.state.store.revision
        await notify(client, "ONLINE", 0, "c1", "c3")
        targets = [FLEET[0] if cd.pause_cluster_secrets else FLEET[1]]
        targets += [FLEET[2]] if cd.flux else []
        untouched = [FLEET[1]] if cd.pause_cluster_secrets else []

        await notify(client, "OFFLINE", 5, "c1", "c3")
        await until(lambda: all(paused(m, doc)[0] for doc in targets))
        assert all(paused(m, doc)[1] is not None for doc in targets)
        assert all(paused(m, doc) == (False, None) for doc in untouched)
        await notify(client, "ONLINE", 10, "c1", "c3")
        await until(lambda: all(paused(m, doc) == (False, None) for doc in targets))
        patched = {k: n for k, n in m.counts().items() if k.startswith("patch ")}
        assert sum(patched.values()) == 2 * len(targets)
        # An Event for each pause and resume, in the object's namespace: granted (a 403
        # would leave none), and not a resource the admission policy looks at.
        await until(lambda: len(_events(m)) == 2 * len(targets))
        events = _events(m)
        assert {(e["regarding"]["kind"], e["metadata"]["namespace"]) for e in events} == {
            (doc["kind"], doc["metadata"]["namespace"]) for doc in targets
        }
        assert not any(e["code"] == 403 for e in m.audit())
        # Each of those writes, as stored (the reactor is the only writer since the seed),
        # is one the admission policy admits.
        policy = Policy.of(objects)
        writes = [e for e in m.state.store.events_since(seeded) if e.type == "MODIFIED"]
        writes = [e for e in writes if e.kind.plural != "leases"]
        assert len(writes) == 2 * len(targets)
        for event in writes:
            kind = event.kind
            request = {
                "operation": "UPDATE",
                "userInfo": {"username": REACTOR_USER},
                "resource": {"group": kind.group, "version": kind.version,
                             "resource": kind.plural},
            }  # fmt: skip
            assert policy.matches(request)
            assert policy.admit(request, event.obj, event.old) is None, event.obj
        created = {
            "operation": "CREATE",
            "userInfo": {"username": REACTOR_USER},
            "resource": {"group": "events.k8s.io", "version": "v1", "resource": "events"},
        }
        assert not policy.matches(created)


def _all(obj: dict[str, Any]) -> bool:
    return True


def _events(m: ManagementCluster) -> list[dict[str, Any]]:
    return m.state.store.items(BY_API_KIND[("events.k8s.io/v1", "Event")], "", _all)
