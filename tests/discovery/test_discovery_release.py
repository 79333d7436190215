"""A Secret's data is released once read: the informer keeps no second copy of it.

The exporter's ``SecretReads(release=True)`` drops each object's ``data`` after reading
its version (issue 34: the data beside the read was a second copy of every credential,
a tenth of the memory per cluster). The read is unchanged, the same version is never
read again, and a new version (a new object, whole) is read afresh.
"""

from __future__ import annotations

import copy
from typing import Any

from fleetwatch.discovery.apisource import RELEASED, KubernetesDiscovery, SecretReads
from tests.helpers.discovery_informer import argocd_secret


def stored(name: str, uid: str, rv: str, server: str = "https://127.0.0.11:6443") -> dict[str, Any]:
    obj = argocd_secret(name, server)
    obj["metadata"].update(uid=uid, resourceVersion=rv)
    return obj


def summary(reads: SecretReads, objects: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c.cluster.name, c.cluster.endpoint) for r in reads.read(objects) for c in r.clusters]


def test_a_read_secret_keeps_no_data_and_reads_the_same_again() -> None:
    objects = {"u1": stored("a", "u1", "5"), "u2": stored("b", "u2", "7")}
    kept = copy.deepcopy(objects)
    reads = SecretReads(KubernetesDiscovery(), release=True)
    first = summary(reads, objects)
    assert first == [("a", "https://127.0.0.11:6443"), ("b", "https://127.0.0.11:6443")]
    assert all(obj["data"] is RELEASED for obj in objects.values())
    assert reads.released == 2
    assert all(obj["metadata"] == kept[uid]["metadata"] for uid, obj in objects.items())
    # The same versions again: taken from what was read, not from the (released) data.
    again = reads.read(objects)
    assert reads.released == 0
    assert [(c.cluster.name, c.config is not None) for r in again for c in r.clusters] == [
        ("a", True),
        ("b", True),
    ]
    assert {r.keys for r in again} == {frozenset({"name", "server", "config"})}


def test_a_new_version_is_read_afresh_and_released_in_turn() -> None:
    objects = {"u1": stored("a", "u1", "5")}
    reads = SecretReads(KubernetesDiscovery(), release=True)
    summary(reads, objects)
    objects["u1"] = stored("a", "u1", "6", server="https://127.0.0.19:6443")  # rotated
    assert summary(reads, objects) == [("a", "https://127.0.0.19:6443")]
    assert objects["u1"]["data"] is RELEASED


def test_without_release_the_objects_are_left_whole() -> None:
    objects = {"u1": stored("a", "u1", "5")}
    kept = copy.deepcopy(objects)
    SecretReads(KubernetesDiscovery()).read(objects)
    assert objects == kept
