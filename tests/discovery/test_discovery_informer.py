"""The list+watch of the management cluster's Secrets, against the management stand-in.

What client-go's reflector does, one behaviour per test: each kind found and nothing else,
changes and deletions followed, a compaction relisted without loss, a closed watch
resumed without a list, errors counted with the last objects kept, Retry-After honoured,
readiness held until the first complete list, a forbidden namespace reported.
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleetwatch.discovery import read_secret
from fleetwatch.discovery.kubecreds import from_kubeconfig
from fleetwatch.discovery.secretwatch import WatchSpec, watch_specs
from fleetwatch.kube.informer import Informer
from fleetwatch.standin.management import ManagementCluster
from fleetwatch.standin.management.kinds import SECRETS
from tests.helpers.discovery_informer import (
    argocd_secret,
    capi_secret,
    labelled_secret,
    names,
    plain_secret,
    running,
    until,
)

pytestmark = pytest.mark.live


@pytest.fixture
async def informer(mgmt: ManagementCluster) -> AsyncIterator[Informer]:
    """An informer of the three kinds cluster-wide on ``mgmt``, once its first list is whole."""
    async with running(mgmt) as started:
        assert await started.wait_synced(10)
        yield started


async def seen_when_added(
    mgmt: ManagementCluster, informer: Informer, name: str, what: str
) -> None:
    """An Argo CD cluster Secret for ``name`` added: the informer holds it."""
    mgmt.seed([argocd_secret(name)])
    await until(lambda: f"cluster-{name}" in names(informer), what=what)


@pytest.fixture
async def watching(mgmt: ManagementCluster, informer: Informer) -> None:
    """Waits until the informer's three watches are open at the server."""
    await until(lambda: mgmt.open_watches() == 3, what="three watches open")


@pytest.fixture
def mgmt_seed() -> list[dict[str, Any]]:
    """What the shared ``mgmt`` (tests/helpers/standin_fixtures.py) holds at the start."""
    return [
        argocd_secret("argo-a"),
        argocd_secret("argo-b"),
        argocd_secret("argo-c"),
        capi_secret("capi-1"),
        capi_secret("capi-1", suffix="ca"),  # same type and label: not a kubeconfig
        labelled_secret("team-x", ["ctx-1", "ctx-2"]),
        plain_secret("unlabelled"),
    ]


async def test_each_kind_is_listed_and_read_and_an_unlabelled_secret_is_not(
    mgmt: ManagementCluster, informer: Informer
) -> None:
    found = names(informer)
    assert "unlabelled" not in found
    assert {"cluster-argo-a", "cluster-argo-b", "cluster-argo-c"} <= found
    assert {"capi-1-kubeconfig", "team-x"} <= found
    clusters = set()
    for obj in informer.objects().values():
        read = read_secret(obj)
        if read is not None:
            clusters |= {c.cluster.name for c in read.clusters}
    assert clusters == {"argo-a", "argo-b", "argo-c", "capi-1", "ctx-1", "ctx-2"}
    assert informer.up
    assert informer.last_sync > 0
    # pages of 2: the three Argo CD Secrets took two requests, the others one each
    assert mgmt.counts()["list secrets"] == 4


async def test_a_modified_secret_is_updated_and_a_deleted_one_removed(
    mgmt: ManagementCluster, informer: Informer
) -> None:
    before = informer.generation
    mgmt.seed([argocd_secret("argo-a", server="https://127.9.9.9:6443")])

    def server_of_a() -> str:
        for obj in informer.objects().values():
            if obj["metadata"]["name"] == "cluster-argo-a":
                return base64.b64decode(obj["data"]["server"]).decode()
        return ""

    await until(lambda: "127.9.9.9" in server_of_a(), what="argo-a modified")
    assert informer.generation > before
    mgmt.state.store.delete(SECRETS, "argocd", "cluster-argo-b")
    await until(lambda: "cluster-argo-b" not in names(informer), what="argo-b deleted")
    # a label removed: DELETED from the watch of that selector, gone from the informer
    unlabelled = argocd_secret("argo-c")
    unlabelled["metadata"]["labels"] = {}
    mgmt.seed([unlabelled])
    await until(lambda: "cluster-argo-c" not in names(informer), what="argo-c unlabelled")
    await seen_when_added(mgmt, informer, "argo-new", "argo-new added")


@pytest.mark.usefixtures("watching")
async def test_a_compaction_relists_without_losing_an_object(
    mgmt: ManagementCluster, informer: Informer
) -> None:
    lists = mgmt.counts()["list secrets"]
    watches = mgmt.counts()["watch secrets"]
    found = names(informer)
    # The watches are kept away (hung) while a Secret changes and the history is
    # compacted: they come back from a revision now forgotten, get 410, and relist.
    mgmt.arm_fault(kind="hang", count=3, verb="watch", resource="secrets")
    mgmt.close_watches()
    await until(lambda: mgmt.counts()["watch secrets"] >= watches + 3, what="hung")
    mgmt.seed([argocd_secret("while-away")])
    mgmt.state.store.delete(SECRETS, "argocd", "cluster-argo-b")
    mgmt.compact()
    mgmt.clear_faults()
    await until(lambda: informer.restarts()["expired"] >= 3, what="three relists")
    await until(lambda: all(r.synced and r.up for r in informer.reflectors))
    assert mgmt.counts()["list secrets"] >= lists + 3
    assert names(informer) == found - {"cluster-argo-b"} | {"cluster-while-away"}
    await seen_when_added(mgmt, informer, "after", "watching again")


@pytest.mark.usefixtures("watching")
async def test_a_closed_watch_resumes_from_its_revision_without_a_list(
    mgmt: ManagementCluster, informer: Informer
) -> None:
    counts = mgmt.counts()
    # a bookmark moves the revision; a Secret changed meanwhile is not missed
    mgmt.close_watches()
    await seen_when_added(mgmt, informer, "while-closed", "change seen")
    await until(lambda: mgmt.counts()["watch secrets"] >= counts["watch secrets"] + 3)
    assert mgmt.counts()["list secrets"] == counts["list secrets"]
    # closed within a second of their start with no event yet: "short" (a failed round:
    # the backoff), else "closed"; either way resumed from the watch
    assert informer.restarts()["closed"] + informer.restarts()["short"] >= 3
    assert informer.restarts()["expired"] == 0


async def test_server_errors_keep_the_last_objects_are_counted_and_recovered_from(
    mgmt: ManagementCluster, informer: Informer
) -> None:
    found = names(informer)
    mgmt.arm_fault(kind="error", count=9, resource="secrets")
    mgmt.close_watches()
    await until(lambda: informer.errors()["server_error"] >= 9, what="nine 500s")
    assert names(informer) == found  # the clusters stay published meanwhile
    assert informer.restarts()["error"] >= 9
    await until(lambda: informer.up, what="recovered")
    assert informer.problems() == []
    await seen_when_added(mgmt, informer, "after-errors", "watching again")


async def test_a_429_waits_for_its_retry_after(mgmt: ManagementCluster) -> None:
    spec = WatchSpec("argocd", "argocd.argoproj.io/secret-type=cluster")
    async with running(mgmt, [spec]) as informer:
        assert await informer.wait_synced(10)
        await until(lambda: mgmt.open_watches() == 1, what="watching")
        mgmt.arm_fault(kind="throttle", seconds=3, retry_after=2, resource="secrets")
        before = mgmt.counts()["watch secrets"]
        mgmt.close_watches()
        # With a 0.05 s backoff the reflector would retry at once; it waits the 2 s the
        # server asked for between two requests.
        await until(lambda: mgmt.counts()["watch secrets"] >= before + 1, what="a 429")
        first = time.monotonic()
        await until(lambda: mgmt.counts()["watch secrets"] >= before + 2, what="a retry")
        assert time.monotonic() - first >= 1.5
        assert informer.errors()["throttled"] >= 1
        await until(lambda: informer.up, within=10, what="after the throttle")


async def test_a_slow_first_list_keeps_the_informer_unsynced(mgmt: ManagementCluster) -> None:
    mgmt.arm_fault(kind="delay", delay_seconds=1.5, verb="list", resource="secrets", count=1)
    async with running(mgmt) as informer:
        await until(lambda: mgmt.counts().get("list secrets", 0) >= 3, what="lists asked")
        assert not informer.synced
        assert await informer.wait_synced(10)
        assert informer.synced


async def test_a_forbidden_namespace_is_a_problem_not_a_crash(mgmt: ManagementCluster) -> None:
    token = mgmt.issue_token(
        "system:serviceaccount:fleetwatch:reader",
        namespaces=["argocd"],
        verbs=["get", "list", "watch"],
    )
    path = mgmt.write_kubeconfig(mgmt.directory / "reader.yaml", token)
    credentials = from_kubeconfig([path], "test")
    specs = watch_specs("fleetwatch.io/kubeconfig", ["argocd", "fleet"])
    async with running(mgmt, specs, credentials) as informer:
        argocd = [r for r in informer.reflectors if r.spec.namespace == "argocd"]
        fleet = [r for r in informer.reflectors if r.spec.namespace == "fleet"]
        await until(lambda: all(r.synced for r in argocd), what="argocd listed")
        await until(lambda: all(r.errors["forbidden"] >= 1 for r in fleet), what="403s")
        assert not informer.synced and not informer.up
        problems = informer.problems()
        assert len(problems) == 3
        assert all("namespace fleet" in p and "forbidden" in p for p in problems)
        assert {"cluster-argo-a", "cluster-argo-b"} <= names(informer)
        assert all(not t.done() for t in informer._tasks)
