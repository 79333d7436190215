"""What the exporter keeps of check results: each result encoded once, when it is handed.

Checks hand plain :class:`~exporter.model.CheckResult` values. A result is served every
cycle and rarely changes, and kept as objects 10,000 clusters' results are hundreds of
thousands of samples, label dicts and target groups, every one of them walked by each
full garbage collection. So the cluster table keeps, per check, only what
:class:`Encoder` (its :class:`~exporter.state.Keeper`) makes of a result: the result
encoded (``exporter.expose.textformat``), a few bytes objects; the plain result is
dropped as soon as it is encoded. A check whose result did not change answers
:class:`~exporter.model.Unchanged` and the table shows the encoding it kept, so a
steady cycle encodes nothing and a rendering only copies bytes.

A result that cannot be encoded (a string that is not Unicode text) is dropped, with a
warning when it is handed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from exporter.expose.snapshot import ClusterView
from exporter.expose.textformat import NO_CHECKS, SEP, EncodedChecks, Families, merge
from exporter.model import CheckResult, MetricFamily
from exporter.state import Kept

log = logging.getLogger(__name__)


class Encoder:
    """The exposition's :class:`~exporter.state.Keeper`: results encoded against the
    families the checks declared."""

    __slots__ = ("index",)

    def __init__(self, families: Iterable[MetricFamily]) -> None:
        self.index = Families(families)

    def keep(self, cluster: str, result: CheckResult) -> EncodedChecks | None:
        try:
            return self.index.encode(cluster, result)
        except UnicodeEncodeError as exc:
            log.warning("cluster %s: a check result was dropped: %s", cluster, exc)
            return None

    def only(self, kept: Kept, families: frozenset[str]) -> EncodedChecks:
        encoded = _encoded(kept)
        segments = encoded.segments()
        lines = [s if n in families else b"" for n, s in zip(encoded.names, segments, strict=True)]
        return EncodedChecks(encoded.names, SEP.join(lines), encoded.sd)


def _encoded(kept: Kept) -> EncodedChecks:
    if not isinstance(kept, EncodedChecks):
        raise TypeError(f"not kept by the exposition's Encoder: {type(kept).__name__}")
    return kept


def shown(checks: Sequence[Kept | None]) -> EncodedChecks:
    """What one cluster's checks show this cycle, as one encoding."""
    if len(checks) == 1:  # the usual case: one check
        only = checks[0]
        return NO_CHECKS if only is None else _encoded(only)
    parts = [_encoded(c) for c in checks if c is not None]
    if not parts:
        return NO_CHECKS
    if len(parts) == 1:
        return parts[0]
    return merge(tuple(dict.fromkeys(n for p in parts for n in p.names)), parts)


def in_order(clusters: Sequence[ClusterView]) -> tuple[EncodedChecks, ...]:
    """Every cluster's encoding, in the snapshot's order (NO_CHECKS: nothing shown)."""
    return tuple(shown(v.checks) if v.checks else NO_CHECKS for v in clusters)
