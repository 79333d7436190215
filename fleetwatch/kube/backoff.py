"""How long a list+watch waits after a failure: client-go's reflector backoff, as data.

client-go's reflector (``tools/cache/reflector.go``) waits between two rounds of
list+watch with ``wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)``
(``k8s.io/apimachinery/pkg/util/wait``): the base delay starts at 0.8 s and doubles per
failure up to 30 s, and each wait is the base plus a jitter of up to 100 % of it, so the
waits are drawn in [0.8, 1.6), [1.6, 3.2), ... and, at the cap, [30, 60) s: about 0.02
rounds a second per reflector where a loop without backoff would send thousands. When no
wait was asked for over the reset period (2 minutes: the API server has been healthy),
the next one starts again at 0.8 s. :class:`Backoff` is that schedule, with the clock and
the random draw injected so a test can walk it without waiting.

One addition of ours (client-go lets the 2 minutes do it): :meth:`Backoff.reset` after a
watch that ran normally, so that a routine ``410`` after a long healthy watch waits the
first step again, not what an outage an hour ago left behind.

Pure: no I/O, no event loop (``fleetwatch.kube.informer`` sleeps; this only says how long).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class BackoffSettings:
    """client-go's reflector defaults (``defaultBackoff*`` in ``reflector.go``)."""

    #: the first base delay (s)
    initial: float = 0.8
    #: the largest base delay (s); a wait is at most ``(1 + jitter)`` times it
    cap: float = 30.0
    #: the base delay is multiplied by this after each wait
    factor: float = 2.0
    #: each wait is ``base * (1 + jitter * U[0, 1))``: rounds of many reflectors spread out
    jitter: float = 1.0
    #: no wait asked for over this long (s): the next one starts from ``initial`` again
    reset_after: float = 120.0


class Backoff:
    """client-go's ``exponentialBackoffManagerImpl``: :meth:`next` is the next wait."""

    def __init__(
        self,
        settings: BackoffSettings = BackoffSettings(),
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._rng = rng or random.Random()
        self._base = settings.initial
        self._last = clock()  # as client-go: the reset period counts from creation
        #: waits asked for since the last reset (0: the next is the first step)
        self.steps = 0

    def __repr__(self) -> str:
        return f"Backoff(steps={self.steps}, base={self._base:g}s)"

    def next(self) -> float:
        """The wait before the next attempt (s), and one step further for the one after."""
        now = self._clock()
        if now - self._last > self.settings.reset_after:
            self.reset()
        self._last = now
        base = self._base
        self._base = min(self.settings.cap, base * self.settings.factor)
        self.steps += 1
        return base * (1.0 + self.settings.jitter * self._rng.random())

    def reset(self) -> None:
        """Start again from the first step (a watch ran normally; a quiet period)."""
        self._base = self.settings.initial
        self.steps = 0
