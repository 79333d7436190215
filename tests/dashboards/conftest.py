"""Fixtures of the dashboard tests: a real Prometheus, empty or scraping a live fleetwatch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dashboards_livestack import LiveStack
from dashboards_prometheus import Prometheus


@pytest.fixture(scope="module")
def empty_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """No targets, no rules: every query must still parse and evaluate."""
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}}
    with Prometheus(tmp_path_factory.mktemp("prom-empty"), config) as prom:
        yield prom


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    """fleetwatch exporter and reactor on a stand-in fleet, scraped by Prometheus with
    the shipped rules, once every panel family has data."""
    stack = LiveStack(tmp_path_factory.mktemp("live")).start()
    try:
        stack.play_outage()
        stack.wait_for_data()
        yield stack
    finally:
        stack.stop()
