"""The version of fleetwatch, and what a running process says about its build.

Prometheus' own components expose ``<name>_build_info{version,revision,...} 1`` and the
process and runtime collectors; ours do the same, so the dashboards and alerts people
already have for "which version runs where" and "is it leaking memory" work unchanged:

    fleetwatch_build_info{python_version="3.11.2",revision="a535603",version="0.1.0"} 1.0
    process_resident_memory_bytes 5.1e+07
    python_gc_objects_collected_total{generation="0"} 311.0

The revision is decided once per process: ``$FLEETWATCH_REVISION`` when set (the image
build sets it from the commit it was built from), else ``git describe`` when the code runs
from a git checkout, else ``unknown`` (an installed wheel without the variable).
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetwatch.common.metricnames import BUILD_INFO

__version__: Final = "0.1.0"

#: Environment variable that names the revision (a commit) the running code was built from.
REVISION_ENV: Final = "FLEETWATCH_REVISION"

#: The folder holding the ``common`` package: the repository root in a checkout.
_SOURCE_ROOT: Final = Path(__file__).resolve().parent.parent


@functools.cache
def revision() -> str:
    """``$FLEETWATCH_REVISION``, else ``git describe`` of a checkout, else ``unknown``."""
    from_env = os.environ.get(REVISION_ENV, "").strip()
    if from_env:
        return from_env
    if not (_SOURCE_ROOT / ".git").exists():
        return "unknown"
    try:
        done = subprocess.run(
            ["git", "-C", str(_SOURCE_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no git, or git hangs
        return "unknown"
    described = done.stdout.strip()
    return described if done.returncode == 0 and described else "unknown"


def build_labels(revision: str = "unknown") -> dict[str, str]:
    """Labels of ``fleetwatch_build_info``, as Prometheus' own ``*_build_info`` series."""
    return {
        "version": __version__,
        "revision": revision,
        "python_version": platform.python_version(),
    }


def version_text(program: str = "fleetwatch") -> str:
    """What ``--version`` prints, shaped like Prometheus' own first line."""
    labels = build_labels(revision())
    return (
        f"{program}, version {labels['version']} (revision: {labels['revision']}, "
        f"python {labels['python_version']})"
    )


class BuildInfoCollector(Collector):
    """``fleetwatch_build_info{version,revision,python_version} 1``."""

    def __init__(self, revision: str) -> None:
        self._labels = build_labels(revision)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            BUILD_INFO,
            "A metric with a constant '1' value labeled by the version and revision "
            "fleetwatch was built from, and the Python version it runs on.",
            labels=list(self._labels),
        )
        family.add_metric(list(self._labels.values()), 1)
        yield family


def register_process_metrics(registry: CollectorRegistry) -> CollectorRegistry:
    """Put build info and prometheus_client's process and Python collectors on ``registry``.

    ``process_*`` (CPU, memory, open files, start time), ``python_info`` and
    ``python_gc_*``: the same series every Prometheus client library exports. On the
    registry the caller passes, never the global one, so tests can build many servers.
    """
    registry.register(BuildInfoCollector(revision()))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
