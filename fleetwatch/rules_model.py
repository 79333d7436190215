"""What ``fleetwatch rules`` renders from: its settings, and rules as data.

A :class:`Rule` is the rule's body (a plain dict, as Prometheus reads it) and the reason
for its shape, written as a comment above it in the rules file; a :class:`Group` holds
them. ``fleetwatch.rules_status``, ``fleetwatch.rules_exporter``,
``fleetwatch.rules_discovery``, ``fleetwatch.rules_reactor`` and ``fleetwatch.rules_cd``
build the groups,
``fleetwatch.rules_render`` writes them as YAML.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from common.contract import STORM_FRACTION, STORM_MIN_CLUSTERS


class RulesError(ValueError):
    """A setting that cannot make sensible rules (the message says which and why)."""


@dataclass(frozen=True)
class RuleSettings:
    """What the rendered rules depend on; every field has a command-line flag."""

    failure_threshold: int = 2
    """N: consecutive failed probes before a cluster is OFFLINE (the guide's grace period)."""

    probe_interval: float = 300.0
    """Seconds between probe cycles (CLUSTER_HEALTH_INTERVAL). Only the hold times of the
    storm guard and of the warning scale with it; detection itself needs no ``for:``."""

    storm_fraction: float = STORM_FRACTION
    """Share of the probeable clusters failing at once that means "the watcher is broken"."""

    storm_min_clusters: int = STORM_MIN_CLUSTERS
    """Smallest probeable fleet where a storm is recognised: 1 failing of 2 is no storm."""

    exporter_job: str = "fleetwatch-exporter"
    """Prometheus ``job`` label of the exporter's scrape config (for the exporter alerts)."""

    reactor_job: str = "fleetwatch-reactor"
    """Prometheus ``job`` label of the reactor's scrape config (for the reactor alerts)."""

    count_rejected: bool = True
    """Whether probes refused for credentials (401, 403, TLS verification) count toward
    OFFLINE. Yes by default, as the guide counts every failed probe: when fleetwatch reads
    the deployers' own credentials, a refused one stops delivery too. No
    (``--no-failure.count-rejected``) for teams whose fleetwatch credentials are not their
    deployers': such a cluster reads UNKNOWN, so nothing is paused or gated."""

    def __post_init__(self) -> None:
        if self.failure_threshold < 1:
            raise RulesError(f"failure threshold must be at least 1, got {self.failure_threshold}")
        if not (math.isfinite(self.probe_interval) and self.probe_interval > 0):
            raise RulesError(
                f"probe interval must be a positive number of seconds, got {self.probe_interval}"
            )
        if not (0 < self.storm_fraction <= 1):
            raise RulesError(f"storm fraction must be in (0, 1], got {self.storm_fraction}")
        if self.storm_min_clusters < 2:
            raise RulesError(
                f"storm minimum fleet size must be at least 2, got {self.storm_min_clusters}"
            )
        if not self.exporter_job or '"' in self.exporter_job or "\\" in self.exporter_job:
            raise RulesError(f"exporter job must be a plain job name, got {self.exporter_job!r}")
        if not self.reactor_job or '"' in self.reactor_job or "\\" in self.reactor_job:
            raise RulesError(f"reactor job must be a plain job name, got {self.reactor_job!r}")

    @property
    def hold(self) -> str:
        """Hold time of the storm guard and the warning: two probe cycles."""
        return prom_duration(2 * self.probe_interval)

    @property
    def detection(self) -> str:
        """Human words for the grace period, used in descriptions."""
        about = prom_duration(self.failure_threshold * self.probe_interval)
        return f"{self.failure_threshold} probes, about {about}"


def prom_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration (``600`` -> ``10m``), exact to the millisecond."""
    millis = max(1, round(seconds * 1000))
    parts: list[str] = []
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


@dataclass(frozen=True)
class Rule:
    """One rule and the comment written above it (the reason for its shape)."""

    why: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Group:
    name: str
    why: str
    rules: tuple[Rule, ...]


def indent(text: str, prefix: str) -> str:
    """``text`` with ``prefix`` before each of its non-blank lines."""
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))
