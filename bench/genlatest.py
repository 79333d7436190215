"""Baseline: ``prometheus_client.generate_latest()`` for N series (the peer of /metrics).

``families_from_text`` turns any exposition text (the exporter's own /metrics) back into
prometheus_client metric families, so ``bench/scrape.py`` can time ``generate_latest()``
on exactly the series the exporter serves, in the same run.

Run: ``.venv/bin/python -m bench.genlatest --series 10000 --runs 5``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from bench.common import summary, write_result


class StaticCollector(Collector):
    """Yields a fixed list of metric families: the same series on every collect()."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        yield from self._families


def synthetic_families(series: int) -> list[Metric]:
    """``series`` samples of one gauge labelled by cluster (about 41 bytes each)."""
    g = GaugeMetricFamily("fleetwatch_cluster_probe_success", "1/0, last probe", labels=["cluster"])
    for i in range(series):
        g.add_metric([f"cluster-{i:05d}"], 1.0)
    return [g]


def families_from_text(text: str) -> list[Metric]:
    """Parse exposition text into families that generate_latest() renders the same way."""
    return list(text_string_to_metric_families(text))


def registry_of(families: Iterable[Metric]) -> CollectorRegistry:
    """The cheapest generate_latest() input: a custom collector with prebuilt families."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StaticCollector(families))
    return reg


def registry_of_metrics(families: Iterable[Metric]) -> CollectorRegistry:
    """The usual input: labelled ``Gauge``/``Counter`` objects set to the same values.

    This is how an exporter written the common way holds its series, and what
    generate_latest() walks on every scrape.
    """
    reg = CollectorRegistry(auto_describe=False)
    for fam in families:
        samples = [s for s in fam.samples if not s.name.endswith("_created")]
        if not samples:
            continue
        labelnames = sorted({k for s in samples for k in s.labels})
        cls = Counter if fam.type == "counter" else Gauge
        metric = cls(fam.name, fam.documentation or fam.name, labelnames, registry=reg)
        for s in samples:
            child = (
                metric.labels(**{k: s.labels.get(k, "") for k in labelnames})
                if labelnames
                else metric
            )
            if isinstance(child, Counter):
                child.inc(s.value)
            else:
                child.set(s.value)
    return reg


def time_generate_latest(reg: CollectorRegistry, runs: int) -> tuple[list[float], int]:
    """Seconds per generate_latest() call, ``runs`` times, and the size of its output."""
    times: list[float] = []
    size = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        body = generate_latest(reg)
        times.append(time.perf_counter() - t0)
        size = len(body)
    return times, size


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {}
    for n in args.series:
        fams = synthetic_families(n)
        for kind, reg in (("collector", registry_of(fams)), ("gauges", registry_of_metrics(fams))):
            times, size = time_generate_latest(reg, args.runs)
            result[f"{n}/{kind}"] = {
                "seconds": summary(times),
                "us_per_series": round(summary(times)["median"] / n * 1e6, 2),
                "bytes": size,
                "bytes_per_series": round(size / n, 1),
            }
    write_result("genlatest", {"series": result}, args.out)
    return result


if __name__ == "__main__":
    main()
