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

from prometheus_client import CollectorRegistry, generate_latest
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
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StaticCollector(families))
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
        times, size = time_generate_latest(registry_of(synthetic_families(n)), args.runs)
        result[str(n)] = {
            "seconds": summary(times),
            "us_per_series": round(summary(times)["median"] / n * 1e6, 2),
            "bytes": size,
            "bytes_per_series": round(size / n, 1),
        }
    write_result("genlatest", {"series": result}, args.out)
    return result


if __name__ == "__main__":
    main()
