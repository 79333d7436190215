"""How late the exporter's probe loop runs: ``fleetwatch_exporter_event_loop_lag_seconds``.

Every probe's steps and deadline, every watch event and every cycle's start is a callback
of the probe side's event loop (``exporter.server``; scrapes have a loop of their own):
work that holds the loop (a thousand TLS handshakes in one turn, a thousand watch events
decoded in one go) delays them all. :class:`LoopLag` is a timer that asks to wake every
:attr:`LoopLag.period` seconds and records how much later than asked it did: the wait a
callback ready at that moment had before it ran. Its own cost is one timer callback per
period (a few microseconds, 4 a second): negligible beside what it measures.

It is a summary, as Node.js' ``eventLoopLag`` and the Go runtime's scheduling latency
are reported: quantiles 0.5, 0.9, 0.99 and 1 (the worst) over the last
:attr:`LoopLag.window` samples (5 minutes at the default period), and the cumulative
``_sum`` and ``_count`` (``rate(_sum)/rate(_count)`` is the mean lag over any range)::

    # HELP fleetwatch_exporter_event_loop_lag_seconds How late the event loop ran ...
    # TYPE fleetwatch_exporter_event_loop_lag_seconds summary
    fleetwatch_exporter_event_loop_lag_seconds{quantile="0.5"} 0.0004
    fleetwatch_exporter_event_loop_lag_seconds{quantile="0.99"} 0.012
    fleetwatch_exporter_event_loop_lag_seconds_sum 1.93
    fleetwatch_exporter_event_loop_lag_seconds_count 4800

The exporter's ``/metrics`` body is rendered when a cycle is published, so the series
are as of the last publication, like the ``process_*`` collectors beside it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import Metric

from fleetwatch.common.metricnames import EXPORTER_EVENT_LOOP_LAG

#: The quantiles published, 1 being the worst sample of the window.
QUANTILES = (0.5, 0.9, 0.99, 1.0)


class LoopLag:
    """A periodic timer measuring how late it fires, and the collector of what it saw."""

    def __init__(
        self,
        period: float = 0.25,
        window: int = 1200,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``period``: seconds between two timers (the finest lag seen is about this
        often); ``window``: samples the quantiles cover (1200 at 0.25 s: 5 minutes)."""
        self.period = period
        self._clock = clock
        self._recent: deque[float] = deque(maxlen=window)
        self.count = 0
        self.sum = 0.0

    def __repr__(self) -> str:
        return f"LoopLag({self.count} samples, worst recent {max(self._recent, default=0):.3f}s)"

    def record(self, late: float) -> None:
        """One sample: seconds later than asked (never negative)."""
        late = max(0.0, late)
        self._recent.append(late)
        self.count += 1
        self.sum += late

    async def run(self) -> None:
        """Sample until cancelled (an owned task of the exporter's application)."""
        while True:
            due = self._clock() + self.period
            await asyncio.sleep(self.period)
            self.record(self._clock() - due)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the window's samples (nearest rank; 0 with none)."""
        return _nearest_rank(sorted(self._recent), q)

    def collect(self) -> Iterator[Metric]:
        """The summary (a ``prometheus_client`` collector)."""
        metric = Metric(
            EXPORTER_EVENT_LOOP_LAG,
            "How late the event loop ran a timer (s): quantiles over the last "
            f"{self._recent.maxlen} samples, one every {self.period:g}s",
            "summary",
        )
        ordered = sorted(self._recent)
        for q in QUANTILES:
            value = _nearest_rank(ordered, q)
            metric.add_sample(EXPORTER_EVENT_LOOP_LAG, {"quantile": f"{q:g}"}, value)
        metric.add_sample(f"{EXPORTER_EVENT_LOOP_LAG}_sum", {}, self.sum)
        metric.add_sample(f"{EXPORTER_EVENT_LOOP_LAG}_count", {}, float(self.count))
        yield metric


def _nearest_rank(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    if q >= 1.0:
        return ordered[-1]
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]
