"""A prerendered collector's text is the text prometheus_client would write, rendered once
per change (``fleetwatch.common.prerendered``), and it reads as any collector elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.common.prerendered import Prerendered, exposition
from reactor.cd.metrics import CdMetrics


class Counted(Prerendered):
    """One gauge per key, counting how often its families were built."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, float] = {"a": 1.0}
        self.built = 0
        self.during_build: dict[str, float] | None = None

    def families(self) -> Iterator[Metric]:
        self.built += 1
        values = self.values
        if self.during_build is not None:  # the data changes while it renders
            self.values, self.during_build = self.during_build, None
            self.changed()
        family = GaugeMetricFamily("counted", "Values by key.", labels=["key"])
        for key, value in sorted(values.items()):
            family.add_metric([key], value)
        yield family

    def set(self, values: dict[str, float]) -> None:
        self.values = values
        self.changed()


def samples(text: bytes) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def registry_with(collector: Prerendered) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    Counter("other", "Another family.", registry=registry).inc(3)
    return registry


def test_the_page_holds_what_generate_latest_writes() -> None:
    collector = Counted()
    registry = registry_with(collector)
    assert samples(exposition(registry)) == samples(generate_latest(registry))
    assert ("counted", (("key", "a"),), 1.0) in samples(exposition(registry))


def test_rendered_once_until_changed_then_again_with_the_new_data() -> None:
    collector = Counted()
    registry = registry_with(collector)
    first = exposition(registry)
    exposition(registry)
    assert collector.built == 1
    collector.set({"a": 1.0, "b": 2.0})
    page = samples(exposition(registry))
    assert collector.built == 2
    assert ("counted", (("key", "b"),), 2.0) in page
    assert samples(exposition(registry)) == page != samples(first)
    assert collector.built == 2


def test_a_change_while_rendering_is_rendered_at_the_next_scrape() -> None:
    collector = Counted()
    registry = registry_with(collector)
    collector.during_build = {"a": 5.0}
    collector.changed()
    assert ("counted", (("key", "a"),), 1.0) in samples(exposition(registry))
    assert ("counted", (("key", "a"),), 5.0) in samples(exposition(registry))
    assert collector.built == 2


def test_outside_a_page_it_collects_as_any_collector() -> None:
    collector = Counted()
    registry = registry_with(collector)
    exposition(registry)
    collector.set({"a": 7.0})
    assert registry.get_sample_value("counted", {"key": "a"}) == 7.0
    assert collector.built == 2  # and the cached text was not touched by it
    assert ("counted", (("key", "a"),), 7.0) in samples(exposition(registry))


def test_the_cd_objects_gauge_renders_again_only_when_a_pass_found_other_counts() -> None:
    registry = CollectorRegistry()
    metrics = CdMetrics(registry)
    counts = {("c1", "flux", "running"): 3, ("c1", "flux", "paused_by_outage"): 1}
    metrics.set_objects(counts, None)
    metrics.set_unwatched({})
    first = exposition(registry)
    generation = metrics.collector._generation
    metrics.set_objects(dict(counts), None)  # the same counts from the next pass
    metrics.set_unwatched({})
    assert metrics.collector._generation == generation
    assert exposition(registry) == first
    metrics.set_objects({**counts, ("c1", "flux", "running"): 2}, {"paused_by_outage": 1})
    page = samples(exposition(registry))
    assert (
        "fleetwatch_reactor_cd_objects",
        (("cluster", "c1"), ("source", "flux"), ("state", "running")),
        2.0,
    ) in page
    assert (
        "fleetwatch_reactor_cd_cluster_secrets",
        (("state", "paused_by_outage"),),
        1.0,
    ) in page
    assert samples(exposition(registry)) == samples(generate_latest(registry))
