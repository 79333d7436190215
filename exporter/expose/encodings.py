"""Every cluster's check results in the text format, each result encoded once.

Checks hand plain :class:`~exporter.model.CheckResult` values and the cluster table keeps
them as handed. A check's result is served every cycle and rarely changes (the
control-plane check hands the very same object while kube-system is unchanged), so the
exposition keeps each cluster's results encoded (``exporter.expose.textformat``) from one
rendering to the next, keyed by the cluster and the results it was built from: results
that are the same objects as last time, or equal to them, are not encoded again: encoding
is most of a rendering's CPU, and most cycles change no result (bench/RESULTS.md).

A result that cannot be encoded (a string that is not Unicode text) is dropped, with a
warning when it is first seen.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from exporter.expose.snapshot import ClusterView
from exporter.expose.textformat import NO_CHECKS, EncodedChecks, Families
from exporter.model import CheckResult, MetricFamily

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Encodings:
    """The clusters' results of one rendering, encoded, to be reused by the next one."""

    #: the families the results are encoded against, as the snapshot declared them
    families: tuple[MetricFamily, ...] = ()
    index: Families = field(default_factory=lambda: Families(()))
    #: by cluster: the results encoded (what the next rendering compares with)
    results: dict[str, tuple[CheckResult, ...]] = field(default_factory=dict)
    #: by cluster: those results encoded
    encoded: dict[str, EncodedChecks] = field(default_factory=dict)
    #: every cluster's encoding in the snapshot's order (NO_CHECKS: no result)
    in_order: tuple[EncodedChecks, ...] = ()


NO_ENCODINGS = Encodings()


def encode_all(
    families: tuple[MetricFamily, ...],
    clusters: Sequence[ClusterView],
    previous: Encodings = NO_ENCODINGS,
) -> Encodings:
    """The results of ``clusters`` encoded, reusing ``previous`` where nothing changed."""
    if families != previous.families:
        previous = Encodings(families, Families(families))
    index = previous.index
    old_results, old_encoded = previous.results, previous.encoded
    results: dict[str, tuple[CheckResult, ...]] = {}
    encoded: dict[str, EncodedChecks] = {}
    in_order: list[EncodedChecks] = []
    for view in clusters:
        checks = view.checks
        if not checks:
            in_order.append(NO_CHECKS)
            continue
        name = view.cluster.name
        old = old_results.get(name)
        if old is not None and (old is checks or old == checks):
            enc = old_encoded[name]
        else:
            enc = _encode(index, name, checks)
        results[name] = checks
        encoded[name] = enc
        in_order.append(enc)
    return Encodings(families, index, results, encoded, tuple(in_order))


def _encode(index: Families, name: str, checks: Sequence[CheckResult]) -> EncodedChecks:
    parts = []
    for result in checks:
        try:
            parts.append(index.encode(name, result))
        except UnicodeEncodeError as exc:
            log.warning("cluster %s: a check result was dropped: %s", name, exc)
    return index.merge(parts)
