"""The health of the list+watch of the management cluster's Secrets, as Prometheus series.

Both servers export it under the same names (``fleetwatch.common.metricnames``): the exporter on its
``/metrics`` beside the probes, the reactor on its own. :class:`InformerCollector` reads
the informer at each collection (a few attributes, and the objects it holds counted by
kind whenever it hands another mapping of them), so the series are never out of step
with it.

Pure: it reads what :class:`InformerHealth` offers (``fleetwatch.kube.informer.Informer`` is
one), and never the network.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from fleetwatch.common.metricnames import (
    DISCOVERY_KUBERNETES_ERRORS,
    DISCOVERY_KUBERNETES_LAST_SYNC,
    DISCOVERY_KUBERNETES_OBJECTS,
    DISCOVERY_KUBERNETES_UP,
    DISCOVERY_KUBERNETES_WATCH_RESTARTS,
)
from fleetwatch.discovery.labels import LabelSelector
from fleetwatch.discovery.secrets import DEFAULT_SELECTOR, kind_of


class ReportedHealth(Protocol):
    """What the collector reads of any list+watch."""

    @property
    def up(self) -> bool: ...

    @property
    def last_sync(self) -> float: ...

    def restarts(self) -> Counter[str]: ...

    def errors(self) -> Counter[str]: ...


class InformerHealth(ReportedHealth, Protocol):
    """An informer of this process: its objects are counted here."""

    def objects(self) -> Mapping[str, Mapping[str, Any]]: ...


@runtime_checkable
class CountedHealth(ReportedHealth, Protocol):
    """A list+watch of another process (the reactor's discovery process), which counts
    its objects by kind itself."""

    def kinds(self) -> Mapping[str, int]: ...


class InformerCollector(Collector):
    """The informer's health, e.g.::

    fleetwatch_discovery_kubernetes_up 1
    fleetwatch_discovery_kubernetes_objects{kind="argocd"} 5000
    fleetwatch_discovery_kubernetes_last_sync_timestamp_seconds 1.7e9
    fleetwatch_discovery_kubernetes_watch_restarts_total{reason="closed"} 3
    fleetwatch_discovery_kubernetes_errors_total{reason="forbidden"} 1
    """

    def __init__(
        self,
        informer: InformerHealth | CountedHealth,
        selector: LabelSelector = DEFAULT_SELECTOR,
    ) -> None:
        self.informer = informer
        self.selector = selector
        #: the objects last counted and their counts: the informer hands the same mapping
        #: until something changes, and counting 20,000 Secrets by kind is tens of
        #: milliseconds of the event loop at every scrape
        self._counted: tuple[Mapping[str, Mapping[str, Any]], dict[str, int]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        informer = self.informer
        yield GaugeMetricFamily(
            DISCOVERY_KUBERNETES_UP,
            "1 while every list+watch of the management cluster's Secrets succeeds.",
            value=1 if informer.up else 0,
        )
        objects = GaugeMetricFamily(
            DISCOVERY_KUBERNETES_OBJECTS,
            "Secrets of the management cluster held, by kind.",
            labels=["kind"],
        )
        for kind, count in sorted(self._kinds().items()):
            objects.add_metric([kind], count)
        yield objects
        yield GaugeMetricFamily(
            DISCOVERY_KUBERNETES_LAST_SYNC,
            "Unix time of the oldest list+watch's last good answer; 0 before the first.",
            value=informer.last_sync,
        )
        yield _counter(
            DISCOVERY_KUBERNETES_WATCH_RESTARTS,
            "Watches started again, by reason (closed, short: closed within a second with "
            "no event, expired, error).",
            informer.restarts(),
            ("closed", "short", "expired", "error"),
        )
        yield _counter(
            DISCOVERY_KUBERNETES_ERRORS,
            "Failed requests to the management cluster's API, by reason.",
            informer.errors(),
            (),
        )

    def _kinds(self) -> Mapping[str, int]:
        """The objects by kind, counted again only for another mapping than the last."""
        if isinstance(self.informer, CountedHealth):
            return self.informer.kinds()
        objects = self.informer.objects()
        if self._counted is None or self._counted[0] is not objects:
            self._counted = (objects, count_kinds(objects.values(), self.selector))
        return self._counted[1]


def count_kinds(objects: Iterable[Mapping[str, Any]], selector: LabelSelector) -> dict[str, int]:
    """Secrets by discovery's kind (argocd, cluster-api, labelled), every kind counted."""
    counts = {"argocd": 0, "cluster-api": 0, "labelled": 0}
    for obj in objects:
        kind = kind_of(obj, selector)
        if kind is not None:
            counts[kind] += 1
    return counts


def _counter(
    name: str, help_text: str, values: Mapping[str, int], always: Iterable[str]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name.removesuffix("_total"), help_text, labels=["reason"])
    for reason in sorted({*always, *values}):
        family.add_metric([reason], values.get(reason, 0))
    return family
