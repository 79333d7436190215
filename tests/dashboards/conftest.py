"""Fixtures of the dashboard tests: a real Prometheus, without fleetwatch or scraping a live one."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.helpers.dashboards_livestack import LiveStack
from tests.helpers.dashboards_prometheus import MetricsServer, MetricsText, Prometheus, Scratch


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    server = MetricsServer(("127.0.0.1", 0), MetricsText)
    thread = threading.Thread(target=server.serve_forever, name="scratch-metrics", daemon=True)
    thread.start()
    target = f"127.0.0.1:{server.server_port}"
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "scratch", "static_configs": [{"targets": [target]}]}],
    }
    try:
        with Prometheus(tmp_path_factory.mktemp("prom-scratch"), config) as prom:
            yield Scratch(prom, server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


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
