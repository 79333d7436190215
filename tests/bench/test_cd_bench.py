"""The CD benchmark: what it seeds resolves as the reactor resolves it, then its quick mode.

The smoke run asserts that every phase ran and gave numbers, and the behaviour the
benchmark relies on (exactly the big cluster's objects paused, one patch each way, all
resumed); timing goals belong in bench/RESULTS.md, not here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench import cd
from bench.common import is_number
from fleetwatch.discovery import DEFAULT_SELECTOR, read_secret
from fleetwatch.discovery.clusters import Discovery
from fleetwatch.discovery.merge import merge
from reactor.cd.objects import CdObject, read_object
from reactor.cd.targets import ClusterIndex
from reactor.store import KnownCluster

PLAN = cd.Plan(objects=400, clusters=20, big=100, resync=2.0, rest=4.0)


def test_the_big_cluster_carries_its_share_and_the_rest_is_spread_round_robin() -> None:
    objects = cd.objects_of(PLAN)
    assert len(objects) == 400
    assert Counter(o["kind"] for o in objects) == {
        "Kustomization": 320,
        "HelmRelease": 40,
        "Application": 40,
    }
    per_cluster = Counter(_cluster(o) for o in objects)
    assert per_cluster.pop("c0000") == 100
    assert set(per_cluster.values()) <= {15, 16} and len(per_cluster) == 19


def test_every_object_resolves_to_the_cluster_its_secret_names() -> None:
    """The Secrets read and merged by discovery (Argo CD's kept, Cluster API's its alias),
    the objects by the reactor's CD reader and index."""
    reads = []
    for i, secret in enumerate(cd.secrets_of(PLAN)):
        secret["metadata"] |= {"uid": f"u{i}", "resourceVersion": "1"}
        read = read_secret(secret, DEFAULT_SELECTOR)
        assert read is not None and read.problems == ()
        reads.append(read)
    argocd = [r for r in reads if r.kind == "argocd"]
    assert 0 < len(argocd) <= PLAN.clusters
    merged = merge(Discovery((), ()), reads)
    assert len(merged.discovery.clusters) == PLAN.clusters
    assert len(merged.aliases) == len(argocd)
    known = [
        KnownCluster(c.name, c.endpoint, c.kubeconfig_secret_ref) for c in merged.discovery.clusters
    ]
    index = ClusterIndex.of(known, merged.aliases, merged.secrets)
    for i, obj in enumerate(cd.objects_of(PLAN)):
        obj["metadata"] |= {"uid": f"o{i}", "resourceVersion": "1"}
        seen = read_object(obj)
        assert isinstance(seen, CdObject), obj
        assert index.resolve(seen.destination) == _cluster(obj)


def _cluster(obj: dict[str, object]) -> str:
    spec = obj["spec"]
    assert isinstance(spec, dict)
    if "destination" in spec:
        return str(spec["destination"]["name"])
    return str(spec["kubeConfig"]["secretRef"]["name"]).removesuffix("-kubeconfig")


@pytest.mark.live
def test_the_quick_mode_mirrors_pauses_and_resumes_exactly_the_big_cluster(
    tmp_path: Path,
) -> None:
    out = cd.main(["--quick", "--out", str(tmp_path / "cd.json")])
    big = out["plan"]["big"]
    for key in ("seed_call_s", "mirrored_after_start_s", "mirrored_after_return_s"):
        assert is_number(out["mirror"][key]), key
    assert is_number(out["relist_s"])
    for phase in ("outage", "recovery"):
        assert is_number(out[phase]["done_after_notification_s"]), phase
        assert out[phase]["not_applied"] == {}, phase
    assert out["outage"]["exactly_those_paused"] is True
    assert out["recovery"]["all_resumed"] is True
    assert out["patches_total"] == 2 * big  # one patch per object each way
    assert is_number(out["rest"]["cpu_s_per_pass"])
    assert "| outage: 100 paused" in cd.markdown(out)
