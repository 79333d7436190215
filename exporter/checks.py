"""The extension seam: per-cluster checks that run after each probe.

A :class:`ClusterCheck` (etcd membership, control-plane targets, ...) is given the cluster,
an authenticated :class:`~exporter.net.ApiClient` (the probe's connection pool, TLS context
and headers) and the probe's result. It returns a
:class:`~exporter.model.CheckResult`: samples of the metric families it declared up front
(the exposition renders them with HELP/TYPE, adding the ``cluster`` label) and Prometheus
HTTP SD target groups (served on ``/sd/control-plane``). The exporter keeps a result only
encoded, as the exposition serves it (``exporter.expose.encodings``), never the result
itself: a check whose result did not change since the last one it handed answers
:data:`~exporter.model.UNCHANGED` (or :class:`~exporter.model.Unchanged` naming the
families still true) and need not keep that result either, as the control-plane check
does (it keeps a digest of what it read).

The cycle runs every check of a cluster concurrently, each within ``--probe.timeout``; a
check that raises or times out yields no samples for that cluster this cycle and counts in
``fleetwatch_exporter_check_errors_total{check}``. A check never sees another cluster. A
check that holds connections of its own (direct etcd) also has ``aclose()``
(:class:`ClosingCheck`): the cycle calls it when it stops. A check that remembers
clusters between cycles also has ``retain(names)`` (:class:`RetainingCheck`): the cycle
calls it every cycle with the clusters still discovered, so under churn (Cluster API
creating and deleting clusters all day) nothing is kept for a cluster that left.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Protocol, runtime_checkable

from exporter.model import CheckResult, MetricFamily, ProbeResult, Unchanged
from exporter.net import ApiClient
from fleetwatch.discovery.clusters import Cluster


class ClusterCheck(Protocol):
    """What the cycle runs for each probeable cluster whose credentials resolved."""

    #: short, stable name: the ``check`` label of the error counter and log lines
    name: str
    #: every family this check may publish (samples of other names are dropped)
    families: Sequence[MetricFamily]

    async def run(
        self, cluster: Cluster, api: ApiClient, probe: ProbeResult
    ) -> CheckResult | Unchanged | None:
        """Results for ``cluster`` this cycle, :class:`Unchanged`, or None for "nothing to
        publish" (the last result is still kept for an ``Unchanged`` to come).

        ``probe`` is this cycle's probe; a check decides itself whether a failed probe
        means skipping (the API is unreachable) or not (etcd may be asked directly).
        Use ``api.get_json(path, timeout)`` for API calls; it raises ``ClusterRequestError``.
        """
        ...


@runtime_checkable
class ClosingCheck(Protocol):
    """A check with connections of its own, closed when the exporter stops."""

    async def aclose(self) -> None: ...


@runtime_checkable
class RetainingCheck(Protocol):
    """A check with per-cluster memory: forgets every cluster not in ``names``."""

    def retain(self, names: Set[str]) -> None: ...
