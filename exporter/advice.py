"""What the cycle tells the operator about itself: a cycle too long, too few open files.

Pure: the runner (``exporter.cycle``) hands in what it measured and logs the
:class:`~exporter.state.Note` it gets back. Each warning is said once per change of its
causes, never once per cycle: a hung cluster keeps every cycle long for as long as it
hangs.

- A cycle longer than ``--probe.interval`` (:func:`slow_cycle_advice`): a probe that runs
  into its timeout makes the cycle last at least that timeout (which defaults to the
  interval under 10 s), whatever the concurrency, so the advice names the hung clusters
  and ``--probe.timeout``; concurrency helps only when probes waited for a slot.
- An open-files limit below what the fleet needs: every probed cluster keeps a connection
  open between cycles (up to ``--probe.max-idle-connections``); past the limit every
  accept and connect fails with EMFILE, the ``/metrics`` listener's included, so the
  exporter stops answering scrapes. The need is the larger of the sockets the probes hold
  now and the connections this cycle's probes will keep: the connections of removed
  clusters stay open for a while and count too.
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter.model import CycleSettings
from exporter.state import Note

#: Hung clusters named in the "cycle too long" warning; the rest are counted.
_NAMED_HUNG = 5
#: Descriptors the exporter needs besides one per kept connection: its listener, scrapes,
#: kubeconfig reads, credential temp files, direct etcd checks.
OPEN_FILES_MARGIN = 256


def slow_cycle_advice(
    elapsed: float, settings: CycleSettings, timed_out: Sequence[str], slot_waits: int
) -> str:
    """Why a cycle outlasted the interval, and the flag that helps, in one line."""
    head = f"probe cycle took {elapsed:.1f}s, longer than the interval of {settings.interval:g}s"
    causes: list[str] = []
    if timed_out:
        names = ", ".join(sorted(timed_out)[:_NAMED_HUNG])
        if len(timed_out) > _NAMED_HUNG:
            names += f" and {len(timed_out) - _NAMED_HUNG} more"
        causes.append(
            f"{len(timed_out)} cluster(s) gave no answer within --probe.timeout "
            f"{settings.timeout:g}s ({names}); "
            + (
                "set --probe.timeout below --probe.interval"
                if settings.timeout >= settings.interval
                else "lower --probe.timeout or raise --probe.interval"
            )
        )
    if slot_waits:
        causes.append(
            f"{slot_waits} probe(s) waited for one of the {settings.concurrency} slots; "
            "raise --probe.concurrency"
        )
    if not causes:
        causes.append("no probe timed out or waited for a slot; raise --probe.interval")
    return f"{head}: " + "; ".join(causes)


class CycleWarnings:
    """The two warnings and what each was last said for."""

    def __init__(self, settings: CycleSettings) -> None:
        self.settings = settings
        #: the causes of the last "cycle too long" warning; None while cycles fit
        self._slow: tuple[frozenset[str], bool] | None = None
        #: the need the open-files warning was last given for; 0 while the limit holds
        self._open_files_for = 0

    def cycle_length(
        self, elapsed: float, timed_out: Sequence[str], slot_waits: int
    ) -> Note | None:
        """One warning when cycles start or change being too long, one info when they fit."""
        if elapsed <= self.settings.interval:
            was_slow = self._slow is not None
            self._slow = None
            if was_slow:
                return Note("info", "probe cycles fit in the interval again (%.1fs)", (elapsed,))
            return None
        situation = (frozenset(timed_out), slot_waits > 0)
        if situation == self._slow:
            return None
        self._slow = situation
        advice = slow_cycle_advice(elapsed, self.settings, timed_out, slot_waits)
        return Note("warning", "%s", (advice,))

    def open_files(
        self, soft_limit: int | None, probed: int, held: int = 0, hard_limit: int | None = None
    ) -> Note | None:
        """Warn (once per need) when ``soft_limit`` (None: unlimited) is too low.

        ``probed``: clusters this cycle probes; ``held``: the probes' sockets open now;
        ``hard_limit``: the process's hard limit (None: unlimited or unknown). The soft
        limit was raised to the hard one at start, so a hard limit too low is the usual
        cause: the warning then says where to raise it, the process cannot.
        """
        bound = self.settings.max_idle_connections
        kept = probed if bound is None else min(probed, bound)
        needed = max(kept, held) + OPEN_FILES_MARGIN
        if soft_limit is None or needed <= soft_limit:
            self._open_files_for = 0
            return None
        if needed <= self._open_files_for:
            return None
        self._open_files_for = needed
        head = (
            "open-files limit %d is below the %d this fleet needs (%d clusters probed keep a "
            "connection each, %d sockets held now, plus %d for the rest)"
        )
        args: tuple[object, ...] = (soft_limit, needed, probed, held, OPEN_FILES_MARGIN)
        if hard_limit is not None and hard_limit < needed:
            return Note("warning", head + ": " + open_files_where(hard_limit, needed), args)
        return Note(
            "warning",
            head + ": raise the limit (LimitNOFILE=, ulimit -n) or set "
            "--probe.max-idle-connections",
            args,
        )


def open_files_where(hard_limit: int, needed: int) -> str:
    """Where a hard open-files limit too low for ``needed`` is raised (the process cannot
    raise its own): the service manager or the container runtime that starts it."""
    return (
        f"the hard limit {hard_limit} cannot be raised by the exporter; raise it where the "
        f"process is started: systemd: LimitNOFILE={needed} (or more) in the unit "
        f"(deploy/systemd sets 65536); docker or podman: run --ulimit nofile={needed}:{needed}; "
        "Kubernetes: the container runtime's limit, which every container inherits "
        "(LimitNOFILE= of the containerd or CRI-O service, CRI-O's default_ulimits); "
        "or keep fewer connections: --probe.max-idle-connections "
        f"{max(0, hard_limit - OPEN_FILES_MARGIN)}"
    )
