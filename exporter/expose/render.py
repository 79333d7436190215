"""Cycle results -> the bodies of ``/metrics`` and ``/sd/control-plane``, once per cycle phase.

Scrapes serve what was rendered here after each cycle phase, so a scrape never waits for a
probe. The text format (0.0.4) is written by hand: a family's samples are contiguous, each
family with HELP and TYPE, label values escaped (``\\``, ``"``, newline). Sample::

    # HELP fleetwatch_cluster_probe_success 1 if the last probe of the API server answered 200 ...
    # TYPE fleetwatch_cluster_probe_success gauge
    fleetwatch_cluster_probe_success{cluster="prod-eu"} 1
    fleetwatch_cluster_probe_failures_total{cluster="prod-us",reason="timeout"} 3
    fleetwatch_cluster_probe_last_failure_reason{cluster="x",reason="tls",class="credentials"} 1

Only the gzipped bodies are kept (``exporter.expose.gzipped.Body``): the text of a large
fleet is about twenty times its gzip. The text is streamed into the compressors a batch
of clusters at a time and never exists whole; a client that does not accept gzip gets it
decompressed as it is sent. The check families are most of the page: their lines are
bytes, encoded once per new result when a check hands it (``exporter.expose.encodings``);
a batch of clusters is split into its families at once, and each family streams into a
compressor of its own, one piece per family (``exporter.expose.gzipped.Piece``). While
no cluster's check results changed (the usual cycle: the control-plane check answers
"unchanged" while kube-system is unchanged), the next rendering sends those compressed pieces and
``/sd/control-plane`` again, and only formats and compresses the cluster and exporter
families. Figures: bench/RESULTS.md.

The HELP texts of the exporter's own families sit next to the code that writes their
lines.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from exporter.expose.encodings import in_order
from exporter.expose.gzipped import Body, Deflater, Piece, deflated, joined
from exporter.expose.labels import labels_text
from exporter.expose.snapshot import ClusterView, Snapshot
from exporter.expose.textformat import (
    NO_CHECKS,
    SEP,
    EncodedChecks,
    escape_help,
    escape_label,
    fmt,
)
from exporter.model import MetricFamily, reason_class
from exporter.state import Kept
from fleetwatch.common.metricnames import (
    CLUSTER_INFO,
    CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES,
    CLUSTER_PROBE_CONSECUTIVE_FAILURES,
    CLUSTER_PROBE_DURATION,
    CLUSTER_PROBE_FAILURES,
    CLUSTER_PROBE_LAST_FAILURE_REASON,
    CLUSTER_PROBE_LAST_SUCCESS,
    CLUSTER_PROBE_SUCCESS,
    CLUSTER_PROBEABLE,
    EXPORTER_CHECK_ERRORS,
    EXPORTER_CLUSTERS_DISCOVERED,
    EXPORTER_CYCLE_DURATION,
    EXPORTER_CYCLES,
    EXPORTER_DISCOVERY_ERRORS,
    EXPORTER_FLEET_CLUSTERS,
    EXPORTER_LAST_CYCLE,
    EXPORTER_PROBE_INTERVAL,
    EXPORTER_PROBE_TIMEOUT,
    EXPORTER_SHARD,
    EXPORTER_SHARDS,
)

__all__ = [
    "CLUSTER_FAMILIES",
    "CONTENT_TYPE",
    "GZIP_LEVEL",
    "Body",
    "Rendered",
    "escape_help",
    "escape_label",
    "fmt",
    "render",
    "render_metrics",
    "render_sd",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

T = TypeVar("T")

#: zlib's level for the kept bodies: levels 1 to 3 cost the same CPU (zlib's fast
#: strategy) and 3 gives the smallest bodies of them; 6 saves a tenth more for over twice
#: the CPU (``bench/render.py --levels``).
GZIP_LEVEL = 3

#: Clusters per batch: what is joined and handed to the compressor at once, so a body is
#: never held whole.
_BATCH = 256

#: The exporter's own families, in output order: (name, type, help).
CLUSTER_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        CLUSTER_INFO,
        "gauge",
        "Always 1: one series per discovered cluster, with its API endpoint and kubeconfig file.",
    ),
    (
        CLUSTER_PROBEABLE,
        "gauge",
        "1 if the cluster's kubeconfig is a readable file, so it is probed; "
        "0: never probed, never failing.",
    ),
    (
        CLUSTER_PROBE_SUCCESS,
        "gauge",
        "1 if the last probe of the API server (GET /readyz?verbose) answered 200, else 0; "
        "absent before the first probe.",
    ),
    (
        CLUSTER_PROBE_DURATION,
        "gauge",
        "Duration of the last probe in seconds.",
    ),
    (
        CLUSTER_PROBE_CONSECUTIVE_FAILURES,
        "gauge",
        "Probes failed in a row since the last success; reset to 0 by a success.",
    ),
    (
        CLUSTER_PROBE_LAST_SUCCESS,
        "gauge",
        "Unix time of the last successful probe; 0 if never since the exporter started.",
    ),
    (
        CLUSTER_PROBE_FAILURES,
        "counter",
        "Failed probes by reason (timeout, connect, tls, unauthorized, not_ready, http_error, "
        "credentials, proxy) since the exporter started.",
    ),
    (
        CLUSTER_PROBE_LAST_FAILURE_REASON,
        "gauge",
        "1 while the last probe failed, with its reason and class (credentials: refused, "
        "401/403, or TLS verification failed; unreachable: the rest); absent after a success.",
    ),
    (
        CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES,
        "gauge",
        "Of the probes failed in a row, those of the class credentials; reset to 0 by a success.",
    ),
)


@dataclass(frozen=True, slots=True)
class Rendered:
    """One cycle phase's answers, ready to send, and what the next rendering may reuse."""

    metrics: Body
    sd_control_plane: Body
    #: the families and every cluster's check results these bodies were rendered from
    checks: tuple[tuple[MetricFamily, ...], tuple[tuple[Kept | None, ...], ...]] = ((), ())
    #: the check families of ``metrics``, compressed (see the module docstring)
    check_families: Piece | None = None
    #: the cycles these bodies count, and when the last of them ended (epoch seconds, 0
    #: before the first): readiness reads what is served, not what is being rendered
    cycles_total: int = 0
    last_cycle_end: float = 0.0


def render(
    snap: Snapshot,
    process_metrics: bytes = b"",
    level: int = GZIP_LEVEL,
    previous: Rendered | None = None,
) -> Rendered:
    """Everything one snapshot serves (CPU-bound: run it in a worker thread).

    ``process_metrics``: the build info and process collectors, rendered by the caller at
    the same moment and appended, so ``/metrics`` is still one body per cycle.
    ``previous``: the last rendering; what did not change since is reused from it.
    """
    checks = (snap.check_families, tuple(v.checks for v in snap.clusters))
    if previous is not None and previous.check_families is not None and previous.checks == checks:
        families, sd = previous.check_families, previous.sd_control_plane
    else:
        encoded = in_order(snap.clusters)
        families = _check_families(snap.check_families, encoded, level)
        sd = Body.of([deflated(_sd_text(encoded), level)])
    metrics = Body.of(
        [
            deflated(_cluster_text(snap.clusters, snap.cluster_labels), level),
            families,
            deflated(itertools.chain(_exporter_text(snap), (process_metrics,)), level),
        ]
    )
    return Rendered(metrics, sd, checks, families, snap.cycles_total, snap.last_cycle_end)


def render_metrics(snap: Snapshot) -> bytes:
    """The whole ``/metrics`` text of one snapshot (without the process collectors)."""
    checks = in_order(snap.clusters)
    return b"".join(
        itertools.chain(
            _cluster_text(snap.clusters, snap.cluster_labels),
            (_check_text(snap.check_families, checks),),
            _exporter_text(snap),
        )
    )


def render_sd(snap: Snapshot) -> bytes:
    """``/sd/control-plane``: the target groups of every cluster's checks, as HTTP SD JSON."""
    return b"".join(_sd_text(in_order(snap.clusters)))


def _head(name: str, kind: str, help_text: str) -> str:
    return f"# HELP {name} {escape_help(help_text)}\n# TYPE {name} {kind}\n"


def _header(name: str, kind: str, help_text: str) -> bytes:
    return _head(name, kind, help_text).encode()


def _joined(lines: Iterable[str]) -> Iterator[bytes]:
    """Lines as bytes, a batch at a time."""
    it = iter(lines)
    while batch := list(itertools.islice(it, _BATCH)):
        yield "".join(batch).encode()


def _batches(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), _BATCH):
        yield items[start : start + _BATCH]


def _cluster_text(clusters: Sequence[ClusterView], labels: bool = False) -> Iterator[bytes]:
    # The label set of each cluster, escaped once and reused by every family.
    keys = [f'cluster="{escape_label(v.cluster.name)}"' for v in clusters]
    pairs = list(zip(keys, clusters, strict=True))
    info, probeable_, success, duration, consecutive, last_success, failures = CLUSTER_FAMILIES[:7]
    last_reason, credential = CLUSTER_FAMILIES[7:]

    yield _header(*info)
    yield from _joined(
        f'{CLUSTER_INFO}{{{k},endpoint="{escape_label(v.cluster.endpoint)}",'
        f'source="{escape_label(v.cluster.kubeconfig_secret_ref)}"}} 1\n'
        for k, v in pairs
    )
    if labels:  # fleetwatch_cluster_labels (exporter.expose.labels)
        yield from labels_text(pairs)
    yield _header(*probeable_)
    yield from _joined(f"{CLUSTER_PROBEABLE}{{{k}}} {1 if v.probeable else 0}\n" for k, v in pairs)
    # The last probe of each probed cluster, looked up once for the two families it feeds.
    probed = [(k, v.last) for k, v in pairs if v.last is not None]
    yield _header(*success)
    yield from _joined(
        f"{CLUSTER_PROBE_SUCCESS}{{{k}}} {1 if last.success else 0}\n" for k, last in probed
    )
    yield _header(*duration)
    yield from _joined(
        f"{CLUSTER_PROBE_DURATION}{{{k}}} {fmt(last.duration)}\n" for k, last in probed
    )
    yield _header(*consecutive)
    yield from _joined(
        f"{CLUSTER_PROBE_CONSECUTIVE_FAILURES}{{{k}}} {v.consecutive_failures}\n"
        for k, v in pairs
        if v.probeable
    )
    yield _header(*last_success)
    yield from _joined(
        f"{CLUSTER_PROBE_LAST_SUCCESS}{{{k}}} {fmt(v.last_success)}\n"
        for k, v in pairs
        if v.probeable
    )
    yield _header(*failures)
    yield from _joined(
        f'{CLUSTER_PROBE_FAILURES}{{{k},reason="{reason.value}"}} {count}\n'
        for k, v in pairs
        for reason, count in v.failures
    )
    # One series per failing cluster: a new reason replaces the old series, never adds one.
    yield _header(*last_reason)
    yield from _joined(
        f'{CLUSTER_PROBE_LAST_FAILURE_REASON}{{{k},reason="{last.reason.value}",'
        f'class="{reason_class(last.reason).value}"}} 1\n'
        for k, last in probed
        if last.reason is not None
    )
    yield _header(*credential)
    yield from _joined(
        f"{CLUSTER_PROBE_CONSECUTIVE_CREDENTIAL_FAILURES}{{{k}}} {v.credential_failures}\n"
        for k, v in pairs
        if v.probeable
    )


def _check_families(
    families: Sequence[MetricFamily], checks: Sequence[EncodedChecks], level: int
) -> Piece:
    """The check families, each compressed as a piece of its own, one after the other.

    A batch of clusters gives every family's lines at once (:func:`_columns`), so each
    family streams into a compressor of its own.
    """
    deflaters = [Deflater(level) for _ in families]
    for deflater, family in zip(deflaters, families, strict=True):
        deflater.write(_header(family.name, family.type, family.help))
    for columns in _columns(families, checks):
        for deflater, column in zip(deflaters, columns, strict=True):
            deflater.write(column)
    return joined(d.piece() for d in deflaters)


def _check_text(families: Sequence[MetricFamily], checks: Sequence[EncodedChecks]) -> bytes:
    """The check families' text, whole (for :func:`render_metrics`)."""
    texts = [[_header(f.name, f.type, f.help)] for f in families]
    for columns in _columns(families, checks):
        for text, column in zip(texts, columns, strict=True):
            text.append(column)
    return b"".join(itertools.chain.from_iterable(texts))


def _columns(
    families: Sequence[MetricFamily], checks: Sequence[EncodedChecks]
) -> Iterator[list[bytes]]:
    """Per batch of clusters, each family's lines of that batch, in ``families`` order.

    ``bytes.split`` and ``zip`` split and regroup a batch, not a Python loop per cluster
    and family.
    """
    names = tuple(f.name for f in families)
    if not names:
        return
    aligned: tuple[str, ...] | None = None  # the names tuple of the encodings seen to match
    for batch in _batches(checks):
        row = []
        for encoded in batch:
            if encoded.names is aligned:
                row.append(encoded.lines.split(SEP))
            elif encoded.names == names:
                aligned = encoded.names
                row.append(encoded.lines.split(SEP))
            else:
                row.append(_aligned(names, encoded))
        yield [b"".join(column) for column in zip(*row, strict=True)]


def _aligned(names: tuple[str, ...], encoded: EncodedChecks) -> list[bytes]:
    """``encoded``'s lines of each of ``names`` (b"" where it has none)."""
    if encoded is NO_CHECKS or not encoded.names:
        return [b""] * len(names)
    at = dict(zip(encoded.names, encoded.segments(), strict=True))
    return [at.get(name, b"") for name in names]


def _exporter_text(snap: Snapshot) -> Iterator[bytes]:
    out: list[str] = []
    for name, kind, help_text, value in (
        (
            EXPORTER_CLUSTERS_DISCOVERED,
            "gauge",
            "Clusters found in the kubeconfig files by the last discovery scan.",
            len(snap.clusters),
        ),
        (
            EXPORTER_DISCOVERY_ERRORS,
            "counter",
            "Bad kubeconfig files or contexts, each counted once when it appears.",
            snap.discovery_errors_total,
        ),
        (
            EXPORTER_CYCLE_DURATION,
            "gauge",
            "Duration of the last complete probe cycle in seconds.",
            snap.cycle_duration,
        ),
        (
            EXPORTER_CYCLES,
            "counter",
            "Probe cycles completed since the exporter started.",
            snap.cycles_total,
        ),
        (
            EXPORTER_LAST_CYCLE,
            "gauge",
            "Unix time the last probe cycle ended; 0 before the first.",
            snap.last_cycle_end,
        ),
        (
            EXPORTER_PROBE_INTERVAL,
            "gauge",
            "Configured seconds between two probe cycles (--probe.interval).",
            snap.interval,
        ),
        (
            EXPORTER_PROBE_TIMEOUT,
            "gauge",
            "Configured timeout of one probe in seconds (--probe.timeout).",
            snap.timeout,
        ),
    ):
        out.append(_head(name, kind, help_text))
        out.append(f"{name} {fmt(value)}\n")
    out.append(
        _head(
            EXPORTER_SHARD,
            "gauge",
            "This exporter's shard of the fleet (--shard.index of --shard.count); always 1.",
        )
    )
    index, count = snap.shard
    out.append(f'{EXPORTER_SHARD}{{index="{index}",count="{count}"}} 1\n')
    # The shards compare these (FleetwatchShardingMismatch): a count they disagree on, or a
    # fleet they see differently, leaves clusters that no shard probes.
    for name, help_text, value in (
        (EXPORTER_SHARDS, "Shards the fleet is split into (--shard.count; 1 unsharded).", count),
        (
            EXPORTER_FLEET_CLUSTERS,
            "Clusters in the whole fleet as this exporter's discovery sees it, before sharding.",
            snap.fleet_size,
        ),
    ):
        out.append(_head(name, "gauge", help_text))
        out.append(f"{name} {value}\n")
    if snap.check_errors:
        out.append(
            _head(
                EXPORTER_CHECK_ERRORS,
                "counter",
                "Per-cluster checks (etcd, control plane) that failed or timed out, by check.",
            )
        )
        out.extend(
            f'{EXPORTER_CHECK_ERRORS}{{check="{escape_label(name)}"}} {count}\n'
            for name, count in snap.check_errors
        )
    yield "".join(out).encode()


def _sd_text(checks: Sequence[EncodedChecks]) -> Iterator[bytes]:
    """``[`` + every cluster's groups, joined by ``,`` + ``]``."""
    yield b"["
    comma = b""
    for batch in _batches(checks):
        parts = [c.sd for c in batch if c.sd]
        if parts:
            yield comma + b",".join(parts)
            comma = b","
    yield b"]"
