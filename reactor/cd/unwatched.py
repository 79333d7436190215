"""Mirrored rows of kinds this replica does not watch: left alone, counted, the paused named.

``reactor.cd.scope`` says why such a row stays as it is. It may still stand for an object
fleetwatch paused for an outage (its last seen ``paused`` and mark): nothing resumes that
object while no replica watches its kind, not even the outage's end. So the replica that
runs the mirror counts these rows by kind and by what was last seen of them
(``fleetwatch_reactor_cd_unwatched_objects``, for the alert
``FleetwatchCDUnwatchedObjectsPaused``) and names the paused ones in its log, once each
time that list changes (not at every resync), so a person can resume them (docs/cd.md).

:class:`UnwatchedRows` keeps the last list it logged; :func:`split` and :func:`count` are
pure.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping

from reactor.cd.objects import CdKind
from reactor.cd.scope import Scope, kind_of, scope_of
from reactor.store import MirroredApp

log = logging.getLogger(__name__)

#: How many names one log line lists before "and N more".
SHOWN = 50


def split(
    rows: list[MirroredApp], watched: Collection[CdKind], dry_run: bool
) -> tuple[list[MirroredApp], list[MirroredApp]]:
    """(the rows this replica mirrors or previews, the rows it leaves alone)."""
    mine: list[MirroredApp] = []
    others: list[MirroredApp] = []
    for row in rows:
        unwatched = scope_of(row.name, watched, dry_run) is Scope.UNWATCHED
        (others if unwatched else mine).append(row)
    return mine, others


def state_of_row(row: MirroredApp) -> str:
    """What was last seen of the row's object, as the objects gauge names it."""
    if not row.paused:
        return "running"
    return "paused_by_outage" if row.mark is not None else "paused"


def count(rows: list[MirroredApp]) -> Counter[tuple[str, str]]:
    """(kind, state) -> rows."""
    return Counter((kind_of(row.name), state_of_row(row)) for row in rows)


class UnwatchedRows:
    """Splits a replica's rows (:func:`split`), and publishes and logs the rows left alone
    when their counts, or the paused ones, change."""

    def __init__(
        self,
        watched: Collection[CdKind],
        dry_run: bool,
        publish: Callable[[Mapping[tuple[str, str], int]], None],
    ) -> None:
        self.watched = tuple(watched)
        self.dry_run = dry_run
        #: where the counts go (``CdMetrics.set_unwatched``)
        self.publish = publish
        self._counts: Counter[tuple[str, str]] = Counter()
        self._paused: frozenset[str] = frozenset()

    def mine(self, rows: list[MirroredApp]) -> list[MirroredApp]:
        """The rows this replica mirrors or previews; the others reported."""
        mine, others = split(rows, self.watched, self.dry_run)
        self.publish(self.report(others))
        return mine

    def report(self, rows: list[MirroredApp]) -> Counter[tuple[str, str]]:
        """The counts of ``rows`` (unwatched), logged when they changed since the last
        report; the names of those fleetwatch paused for an outage, when they changed."""
        counts = count(rows)
        if counts != self._counts and rows:
            kinds = Counter(kind_of(row.name) for row in rows)
            log.info(
                "cd: %d mirrored app(s) of kinds this replica does not watch are left as "
                "they are: %s",
                len(rows),
                ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items())),
            )
        self._counts = counts
        paused = sorted(
            (row for row in rows if state_of_row(row) == "paused_by_outage"),
            key=lambda row: row.name,
        )
        names = frozenset(row.name for row in paused)
        if names != self._paused:
            if paused:
                shown = ", ".join(f"{row.name} (outage {row.mark})" for row in paused[:SHOWN])
                more = f" and {len(paused) - SHOWN} more" if len(paused) > SHOWN else ""
                # A dry run acts on nothing: the acting replica beside it may watch them.
                said = (
                    (logging.INFO, "cd (dry run): %d object(s) of kinds this dry run does not "
                     "watch were paused by fleetwatch for an outage; unless the acting replica "
                     "watches their kind, nothing will resume them: %s%s")
                    if self.dry_run
                    else (logging.WARNING, "cd: %d object(s) of kinds this replica does not "
                          "watch were paused by fleetwatch for an outage, and nothing will "
                          "resume them: %s%s. Resume them by hand, or run a replica that "
                          'watches their kind (docs/cd.md, "Rows of a kind no replica '
                          'watches")')
                )  # fmt: skip
                log.log(said[0], said[1], len(paused), shown, more)
            else:
                log.info("cd: no object of an unwatched kind carries fleetwatch's pause any more")
        self._paused = names
        return counts

    def reset(self) -> None:
        """Forget what was logged (a replica that begins to act logs it again)."""
        self._counts = Counter()
        self._paused = frozenset()
