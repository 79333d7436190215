"""Shared fixtures. Servers are real and local; see fleetwatch.procs for how they are run.

Helper modules are named ``<folder>_<what>.py`` and the folders that others import from
are on ``pythonpath`` (pyproject.toml), so ``from etcd_cluster import EtcdCluster`` works
from any test folder.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from etcd_cluster import EtcdCluster


@pytest.fixture(scope="module")
def etcd_cluster() -> Iterator[EtcdCluster]:
    """A real 3-member etcd, shared by the tests of one module (starting one costs 0.2-2.7 s).

    The data dirs live in a folder of our own, not pytest's numbered basetemp, which a
    concurrent pytest run may rotate away under a running etcd.
    """
    with tempfile.TemporaryDirectory(prefix="fleetwatch-etcd-") as root:
        cluster = EtcdCluster(Path(root)).start()
        try:
            yield cluster
        finally:
            cluster.stop()
