"""The reactor's slim fleet of Secret clusters and its differences (``reactor.secretfleet``).

What the discovery process sends must rebuild, at the reactor, exactly the fleet it read:
a diff applied to the fleet it was taken against gives the new fleet; a whole diff
replaces whatever was held; the pieces a diff travels in (through pickle, as on the pipe)
give the same diff again. The reader over Secrets as the API serves them: the first read
is whole, an unchanged informer reads as nothing, a rotation as one cluster, a deletion
as a name gone, and a problem is said once, never with a credential.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from fleetwatch.discovery import Discovery
from fleetwatch.discovery.apisource import KubernetesDiscovery
from fleetwatch.discovery.clusters import Cluster
from fleetwatch.discovery.secrets import SecretShape
from reactor.secretfleet import (
    DiffBuilder,
    FleetDiff,
    FleetReader,
    SecretFleet,
    SlimCluster,
    diff,
    files_for_reader,
)
from tests.helpers.discovery_informer import SENTINEL, argocd_secret, labelled_secret

ARGOCD = SecretShape("argocd", frozenset({"name", "server", "config"}))


def cluster(name: str, server: str = "https://127.0.0.11:6443", why: str | None = None) -> Any:
    return SlimCluster(name, server, f"secret://argocd/cluster-{name}", why)


def fleet(*names: str, **changes: Any) -> SecretFleet:
    clusters = {n: cluster(n) for n in names}
    found = SecretFleet(
        clusters=clusters,
        held=frozenset(c.ref for c in clusters.values()),
        shapes={c.ref: ARGOCD for c in clusters.values()},
    )
    for key, value in changes.items():
        found = SecretFleet(**{**found.__dict__, key: value})
    return found


BEFORE = fleet("a", "b", "c", aliases={"secret://fleet/a-kubeconfig": "a"}, problems=1)
AFTER = fleet(
    "a",
    "c",
    "d",
    aliases={"secret://fleet/d-kubeconfig": "d"},
    problems=0,
    clusters={
        "a": cluster("a", "https://127.0.0.15:6443"),  # rotated
        "c": cluster("c"),
        "d": cluster("d", why="its config has awsAuthConfig"),
    },
)


def test_a_diff_applied_to_the_fleet_it_was_taken_against_gives_the_new_fleet() -> None:
    found = diff(BEFORE, AFTER, full=False, synced=True)
    assert set(found.clusters) == {"a", "d"}  # rotated, new
    assert found.clusters_gone == ("b",)
    assert BEFORE.apply(found) == AFTER
    assert found.mirror_changed  # an alias came and went


def test_a_whole_diff_replaces_what_was_held() -> None:
    found = diff(BEFORE, AFTER, full=True, synced=False)
    assert set(found.clusters) == {"a", "c", "d"}
    assert fleet("x", "y").apply(found) == AFTER
    assert not found.synced


def test_an_unchanged_fleet_is_an_empty_diff_that_changes_nothing() -> None:
    found = diff(AFTER, AFTER, full=False, synced=True)
    assert list(found.entries()) == []
    assert not found.mirror_changed
    applied = AFTER.apply(found)
    assert applied == AFTER
    assert applied.shapes is AFTER.shapes  # nothing copied for nothing


def test_the_pieces_of_a_diff_give_the_same_diff_through_pickle() -> None:
    found = diff(BEFORE, AFTER, full=False, synced=True)
    entries = list(found.entries())
    builder = DiffBuilder()
    for start in range(0, len(entries), 2):
        builder.add(pickle.loads(pickle.dumps(entries[start : start + 2])))
    again = builder.build(pickle.loads(pickle.dumps(found.end())))
    assert again == found
    assert BEFORE.apply(again) == AFTER
    # the builder starts afresh after a build
    assert builder.build(FleetDiff().end()) == FleetDiff()


def test_shapes_are_interned_and_an_unknown_entry_is_refused() -> None:
    builder = DiffBuilder()
    key = ("argocd", ("config", "name", "server"))
    builder.add([("shape", "secret://argocd/a", key), ("shape", "secret://argocd/b", key)])
    shapes = builder.build(FleetDiff().end()).shapes
    assert shapes["secret://argocd/a"] is shapes["secret://argocd/b"]
    assert shapes["secret://argocd/a"] == ARGOCD
    with pytest.raises(ValueError, match="unknown fleet entry"):
        builder.add([("cluster?", "a", None)])


def test_refused_names_why_each_cluster_cannot_be_probed() -> None:
    assert AFTER.refused() == {"secret://argocd/cluster-d": "its config has awsAuthConfig"}


def _objects(*secrets: dict[str, Any]) -> dict[str, dict[str, Any]]:
    objects = {}
    for i, secret in enumerate(secrets):
        meta = secret["metadata"]
        meta.setdefault("uid", f"uid-{meta['namespace']}-{meta['name']}")
        meta.setdefault("resourceVersion", str(i + 1))
        objects[meta["uid"]] = secret
    return objects


def test_the_reader_sends_everything_once_then_only_what_changed() -> None:
    files = Discovery(
        (Cluster("taken", "https://127.0.0.1:6443", "/etc/kubeconfig", "taken", "http://u:pw@p"),),
        (),
    )
    reader = FleetReader(KubernetesDiscovery(), files_for_reader(files))
    assert reader.files.clusters[0].proxy_url is None  # a proxy's password stays home
    objects = _objects(
        argocd_secret("a"),
        argocd_secret("b", "https://127.0.0.12:6443"),
        argocd_secret("taken", "https://127.0.0.19:6443"),  # a file has the name
        labelled_secret("team-x", ["c1"]),
    )
    first = reader.read(objects, synced=True)
    assert first.full and first.synced
    assert set(first.clusters) == {"a", "b", "c1"}
    assert first.problems == 1
    (problem,) = first.new_problems
    assert "duplicate name: first seen in /etc/kubeconfig" in problem
    assert first.held_added == {
        "secret://argocd/cluster-a",
        "secret://argocd/cluster-b",
        "secret://teams/team-x#c1.yaml",
    }

    again = reader.read(objects, synced=True)
    assert not again.full
    assert list(again.entries()) == [] and again.new_problems == ()  # said once

    rotated = argocd_secret("a", "https://127.0.0.15:6443", token="ROTATED")
    rotated["metadata"].update(uid="uid-argocd-cluster-a", resourceVersion="9")
    objects[rotated["metadata"]["uid"]] = rotated
    del objects["uid-argocd-cluster-b"]
    changed = reader.read(objects, synced=True)
    assert changed.clusters == {
        "a": SlimCluster("a", "https://127.0.0.15:6443", "secret://argocd/cluster-a", None)
    }
    assert changed.clusters_gone == ("b",)
    assert changed.held_removed == {"secret://argocd/cluster-b"}
    assert changed.shapes_gone == ("secret://argocd/cluster-b",)
    wire = pickle.dumps([list(d.entries()) for d in (first, again, changed)])
    assert SENTINEL.encode() not in wire and b"ROTATED" not in wire
