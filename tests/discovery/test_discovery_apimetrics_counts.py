"""The Secrets held are counted by kind once per mapping the informer hands, not at every
scrape: at 20,000 Secrets the count was tens of milliseconds of the event loop per
``/metrics``. The informer hands a new mapping whenever an object changed, and the counts
follow it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from fleetwatch.common.metricnames import DISCOVERY_KUBERNETES_OBJECTS
from fleetwatch.discovery.apimetrics import InformerCollector


def argocd(uid: str) -> dict[str, Any]:
    labels = {"argocd.argoproj.io/secret-type": "cluster"}
    return {"metadata": {"uid": uid, "name": uid, "labels": labels}, "data": {}}


class Counted(dict[str, Any]):
    """The informer's mapping, counting the passes over it."""

    passes = 0

    def values(self) -> Any:
        Counted.passes += 1
        return super().values()


class Informer:
    up = True
    last_sync = 1.0

    def __init__(self) -> None:
        self.held: Mapping[str, Any] = Counted({"a": argocd("a")})

    def objects(self) -> Mapping[str, Any]:
        return self.held

    def restarts(self) -> Counter[str]:
        return Counter()

    def errors(self) -> Counter[str]:
        return Counter()


def test_the_kinds_are_counted_once_per_mapping_and_follow_a_new_one() -> None:
    informer = Informer()
    registry = CollectorRegistry()
    registry.register(InformerCollector(informer))

    def argocd_count() -> float | None:
        return registry.get_sample_value(DISCOVERY_KUBERNETES_OBJECTS, {"kind": "argocd"})

    Counted.passes = 0
    assert argocd_count() == 1
    assert argocd_count() == 1
    assert Counted.passes == 1  # the second scrape reused the count
    informer.held = Counted({"a": argocd("a"), "b": argocd("b")})  # a Secret added
    assert argocd_count() == 2
    assert Counted.passes == 2
