"""What ``fleetwatch rules`` renders from: its settings, and rules as data.

A :class:`Rule` is the rule's body (a plain dict, as Prometheus reads it) and the reason
for its shape, written as a comment above it in the rules file; a :class:`Group` holds
them. ``alerts.status``, ``alerts.exporter``,
``alerts.discovery``, ``alerts.reactor`` and ``alerts.cd``
build the groups,
``alerts.render`` writes them as YAML.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fleetwatch.common.contract import FAILURE_THRESHOLD, STORM_FRACTION, STORM_MIN_CLUSTERS

#: Where the runbooks are when nobody says otherwise: the page's path in fleetwatch's
#: source, which every copy of the project holds. It is no link a browser can follow from
#: Alertmanager, and an address we do not control would be worse (a 404, or someone else's
#: page at 3 a.m.): a team renders the rules with ``--runbook.base-url`` set to where it
#: publishes docs/runbooks.md (a wiki, its Git host), as deploy/ and docs/rules.md say.
RUNBOOK_BASE_URL = "docs/runbooks.md"


class RulesError(ValueError):
    """A setting that cannot make sensible rules (the message says which and why)."""


@dataclass(frozen=True)
class RuleSettings:
    """What the rendered rules depend on; every field has a command-line flag."""

    failure_threshold: int = FAILURE_THRESHOLD
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

    runbook_base_url: str = RUNBOOK_BASE_URL
    """Absolute URL of the runbooks page; every alert's ``runbook_url`` is it plus ``#``
    and the alert's section. Absolute, because Alertmanager and Grafana show it as a link
    far from any checkout."""

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
        _check_base_url(self.runbook_base_url)

    @property
    def hold(self) -> str:
        """Hold time of the storm guard and the warning: two probe cycles."""
        return prom_duration(2 * self.probe_interval)

    @property
    def detection(self) -> str:
        """Human words for the grace period, used in descriptions."""
        about = prom_duration(self.failure_threshold * self.probe_interval)
        return f"{self.failure_threshold} probes, about {about}"


def _check_base_url(url: str) -> None:
    """An absolute http(s) URL, or a relative path (the default), without a fragment
    (ours is added) or template braces (annotations are Go templates: ``{{`` would be
    executed)."""
    parts = urlsplit(url)
    relative = not parts.scheme and not parts.netloc and bool(parts.path)
    if not relative and (parts.scheme not in ("http", "https") or not parts.netloc):
        raise RulesError(f"runbook base URL must be an absolute http(s) URL or a path, got {url!r}")
    if "#" in url or "{{" in url or "}}" in url or re.search(r"[\s\x00-\x1f\x7f]", url):
        raise RulesError(
            f"runbook base URL must have no fragment, template braces or spaces, got {url!r}"
        )


def runbook_anchor(alert: str) -> str:
    """The anchor GitHub gives the heading ``## <alert>`` in docs/runbooks.md.

    GitHub lowercases a heading, drops what is not a letter, digit, space, ``-`` or ``_``,
    and turns spaces into ``-``; an alert name is letters and digits, so its anchor is the
    name in lower case.
    """
    return re.sub(r"[^a-z0-9 _-]", "", alert.lower()).replace(" ", "-")


def runbook_url(alert: str, settings: RuleSettings) -> str:
    """The ``runbook_url`` annotation of ``alert``."""
    return f"{settings.runbook_base_url}#{runbook_anchor(alert)}"


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
