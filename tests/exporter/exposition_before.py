"""The exposition as it was before r3 (commit 8a3e263), kept to prove the new one identical.

``render_metrics``, ``render_sd`` and everything they call are copied verbatim from
``exporter/expose/render.py`` of that commit; only the inputs are declared here, in the shape
they had then: a cluster's check results as ``CheckResult`` objects. Nothing else may
change in this file: tests/exporter/test_exporter_exposition.py renders the same state
with both and compares the bytes.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass

from exporter.model import CheckResult, MetricFamily, Reason
from fleetwatch.discovery.clusters import Cluster


@dataclass(frozen=True)
class ClusterView:
    """One cluster as the exposition showed it (``exporter.expose.snapshot`` of 8a3e263)."""

    cluster: Cluster
    probeable: bool
    success: bool | None
    duration: float
    consecutive_failures: int
    last_success: float
    failures: tuple[tuple[Reason, int], ...]
    checks: tuple[CheckResult, ...]


@dataclass(frozen=True)
class Snapshot:
    """``exporter.expose.snapshot.Snapshot`` of 8a3e263."""

    clusters: tuple[ClusterView, ...]
    check_families: tuple[MetricFamily, ...]
    check_errors: tuple[tuple[str, int], ...]
    discovery_errors_total: int
    cycles_total: int
    cycle_duration: float
    last_cycle_end: float
    interval: float
    timeout: float
    shard: tuple[int, int] = (0, 1)


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: The exporter's own families, in output order: (name, type, help).
CLUSTER_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "fleetwatch_cluster_info",
        "gauge",
        "Always 1: one series per discovered cluster, with its API endpoint and kubeconfig file.",
    ),
    (
        "fleetwatch_cluster_probeable",
        "gauge",
        "1 if the cluster's kubeconfig is a readable file, so it is probed; "
        "0: never probed, never failing.",
    ),
    (
        "fleetwatch_cluster_probe_success",
        "gauge",
        "1 if the last probe of the API server (GET /readyz?verbose) answered 200, else 0; "
        "absent before the first probe.",
    ),
    (
        "fleetwatch_cluster_probe_duration_seconds",
        "gauge",
        "Duration of the last probe in seconds.",
    ),
    (
        "fleetwatch_cluster_probe_consecutive_failures",
        "gauge",
        "Probes failed in a row since the last success; reset to 0 by a success.",
    ),
    (
        "fleetwatch_cluster_probe_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the last successful probe; 0 if never since the exporter started.",
    ),
    (
        "fleetwatch_cluster_probe_failures_total",
        "counter",
        "Failed probes by reason (timeout, connect, tls, unauthorized, not_ready, http_error, "
        "credentials, proxy) since the exporter started.",
    ),
)


@dataclass(frozen=True)
class Rendered:
    """One cycle's answers, ready to send."""

    metrics: bytes
    metrics_gzip: bytes
    sd_control_plane: bytes


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def fmt(value: float) -> str:
    """A sample value as Go's ParseFloat reads it; integers without a decimal point."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _header(out: list[str], name: str, kind: str, help_text: str) -> None:
    out.append(f"# HELP {name} {escape_help(help_text)}\n# TYPE {name} {kind}\n")


def render_metrics(snap: Snapshot) -> bytes:
    """The whole ``/metrics`` body of one snapshot."""
    out: list[str] = []
    clusters = snap.clusters
    # The label set of each cluster, escaped once and reused by every family.
    keys = [f'cluster="{escape_label(v.cluster.name)}"' for v in clusters]
    pairs = list(zip(keys, clusters, strict=True))
    info, probeable_, success, duration, consecutive, last_success, failures = CLUSTER_FAMILIES

    _header(out, *info)
    out.extend(
        f'fleetwatch_cluster_info{{{k},endpoint="{escape_label(v.cluster.endpoint)}",'
        f'source="{escape_label(v.cluster.kubeconfig_secret_ref)}"}} 1\n'
        for k, v in pairs
    )
    _header(out, *probeable_)
    out.extend(f"fleetwatch_cluster_probeable{{{k}}} {1 if v.probeable else 0}\n" for k, v in pairs)
    _header(out, *success)
    out.extend(
        f"fleetwatch_cluster_probe_success{{{k}}} {1 if v.success else 0}\n"
        for k, v in pairs
        if v.success is not None
    )
    _header(out, *duration)
    out.extend(
        f"fleetwatch_cluster_probe_duration_seconds{{{k}}} {fmt(v.duration)}\n"
        for k, v in pairs
        if v.success is not None
    )
    _header(out, *consecutive)
    out.extend(
        f"fleetwatch_cluster_probe_consecutive_failures{{{k}}} {v.consecutive_failures}\n"
        for k, v in pairs
        if v.probeable
    )
    _header(out, *last_success)
    out.extend(
        f"fleetwatch_cluster_probe_last_success_timestamp_seconds{{{k}}} {fmt(v.last_success)}\n"
        for k, v in pairs
        if v.probeable
    )
    _header(out, *failures)
    out.extend(
        f'fleetwatch_cluster_probe_failures_total{{{k},reason="{reason.value}"}} {count}\n'
        for k, v in pairs
        for reason, count in v.failures
    )
    _render_check_families(out, snap.check_families, pairs)
    _render_exporter(out, snap)
    return "".join(out).encode()


#: The lines (and ``/sd/control-plane`` groups) of the check results of the last rendering,
#: by result identity and cluster: a check that hands the same result object again (the
#: control-plane check does while kube-system is unchanged) costs a lookup, not a
#: rendering. Each entry holds its result, so an identity is never reused while cached;
#: each rendering keeps only what it used.
_check_lines: dict[tuple[int, str], tuple[CheckResult, tuple[tuple[str, str], ...]]] = {}
_sd_groups: dict[tuple[int, str], tuple[CheckResult, tuple[str, ...]]] = {}


def _sample_lines(key: str, result: CheckResult) -> tuple[tuple[str, str], ...]:
    out = []
    for sample in result.samples:
        extra = "".join(
            f',{name}="{escape_label(value)}"'
            for name, value in sample.labels.items()
            if name != "cluster"
        )
        out.append((sample.name, f"{sample.name}{{{key}{extra}}} {fmt(sample.value)}\n"))
    return tuple(out)


def _render_check_families(
    out: list[str], families: Iterable[MetricFamily], pairs: list[tuple[str, ClusterView]]
) -> None:
    global _check_lines
    by_name: dict[str, list[str]] = {f.name: [] for f in families}
    cache, used = _check_lines, {}
    for key, view in pairs:
        for result in view.checks:
            ident = (id(result), key)
            hit = cache.get(ident)
            if hit is None or hit[0] is not result:
                hit = (result, _sample_lines(key, result))
            used[ident] = hit
            for name, line in hit[1]:
                lines = by_name.get(name)
                if lines is not None:  # undeclared family: dropped (HELP/TYPE unknown)
                    lines.append(line)
    _check_lines = used
    for fam in families:
        _header(out, fam.name, fam.type, fam.help)
        out.extend(by_name[fam.name])


def _render_exporter(out: list[str], snap: Snapshot) -> None:
    for name, kind, help_text, value in (
        (
            "fleetwatch_exporter_clusters_discovered",
            "gauge",
            "Clusters found in the kubeconfig files by the last discovery scan.",
            len(snap.clusters),
        ),
        (
            "fleetwatch_exporter_discovery_errors_total",
            "counter",
            "Bad kubeconfig files or contexts, each counted once when it appears.",
            snap.discovery_errors_total,
        ),
        (
            "fleetwatch_exporter_cycle_duration_seconds",
            "gauge",
            "Duration of the last complete probe cycle in seconds.",
            snap.cycle_duration,
        ),
        (
            "fleetwatch_exporter_cycles_total",
            "counter",
            "Probe cycles completed since the exporter started.",
            snap.cycles_total,
        ),
        (
            "fleetwatch_exporter_last_cycle_timestamp_seconds",
            "gauge",
            "Unix time the last probe cycle ended; 0 before the first.",
            snap.last_cycle_end,
        ),
        (
            "fleetwatch_exporter_probe_interval_seconds",
            "gauge",
            "Configured seconds between two probe cycles (--probe.interval).",
            snap.interval,
        ),
        (
            "fleetwatch_exporter_probe_timeout_seconds",
            "gauge",
            "Configured timeout of one probe in seconds (--probe.timeout).",
            snap.timeout,
        ),
    ):
        _header(out, name, kind, help_text)
        out.append(f"{name} {fmt(value)}\n")
    _header(
        out,
        "fleetwatch_exporter_shard",
        "gauge",
        "This exporter's shard of the fleet (--shard.index of --shard.count); always 1.",
    )
    index, count = snap.shard
    out.append(f'fleetwatch_exporter_shard{{index="{index}",count="{count}"}} 1\n')
    if snap.check_errors:
        _header(
            out,
            "fleetwatch_exporter_check_errors_total",
            "counter",
            "Per-cluster checks (etcd, control plane) that failed or timed out, by check.",
        )
        out.extend(
            f'fleetwatch_exporter_check_errors_total{{check="{escape_label(name)}"}} {count}\n'
            for name, count in snap.check_errors
        )


def render_sd(snap: Snapshot) -> bytes:
    """``/sd/control-plane``: the target groups of every cluster's checks, as HTTP SD JSON."""
    global _sd_groups
    cache, used = _sd_groups, {}
    parts: list[str] = []
    for view in snap.clusters:
        name = view.cluster.name
        for result in view.checks:
            ident = (id(result), name)
            hit = cache.get(ident)
            if hit is None or hit[0] is not result:
                groups = (
                    {"targets": list(group.targets), "labels": {"cluster": name, **group.labels}}
                    for group in result.targets
                )
                hit = (result, tuple(json.dumps(g, separators=(",", ":")) for g in groups))
            used[ident] = hit
            parts.extend(hit[1])
    _sd_groups = used
    return ("[" + ",".join(parts) + "]").encode()


def render(snap: Snapshot, process_metrics: bytes = b"") -> Rendered:
    """Everything one snapshot serves (CPU-bound: run it in a worker thread).

    ``process_metrics``: the build info and process collectors, rendered by the caller at
    the same moment and appended, so ``/metrics`` is still one body per cycle.
    """
    body = render_metrics(snap) + process_metrics
    return Rendered(
        metrics=body,
        metrics_gzip=gzip.compress(body, compresslevel=6, mtime=0),
        sd_control_plane=render_sd(snap),
    )
