"""Why a cluster has its status: the last failure reason the reactor was told, and the
storm guard or a silence holding an OFFLINE back. Pure code; the store keeps the result.

The status alerts carry the exporter's last failure reason as annotations (``reason``,
``reason_class``: ``unreachable`` or ``credentials``; ``alerts.reason``): each is the same
query of the cluster's current series, so the latest evaluated alert of a cluster tells the
current reason whichever of the two it is, and an empty one says its last probe succeeded.
Annotations change in place (no new ``startsAt``), so a repeat of an alert the state
machine already holds still brings news here.

- Webhooks (:func:`webhook_notes`): a firing status alert tells the reason when it is the
  cluster's live instance after the notification is folded (an older instance delivered
  late says nothing). An alert without a ``reason`` annotation (rules older than it) says
  nothing either; an empty one clears it. A delivered ``FleetClusterOffline`` was not held
  back, so it clears the hold.
- Reconciliation (:func:`listing_notes`): per cluster, the status alert listed with the
  latest ``startsAt``, suppressed or not (an inhibited OFFLINE still carries the reason
  that would have made it OFFLINE). A ``FleetClusterOffline`` listed as inhibited is held
  by the storm guard (the only inhibition of it the shipped Alertmanager configuration
  has: ``FleetProbeStorm``); one silenced is held by a silence (planned maintenance).
  Every cluster listed with no such alert is held by nothing.

What each hold means for a reader is :func:`held_note`: one sentence, or None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from reactor.fields import clip
from reactor.statemachine import AlertState, ClusterAlertState, Status, StatusAlert

if TYPE_CHECKING:
    from reactor.store import ClusterRecord, Store


class SignalLike(Protocol):
    """A ``reactor.alertmanager.signals.Signal`` (which imports this module: named by shape
    here)."""

    @property
    def cluster(self) -> str: ...
    @property
    def alert(self) -> StatusAlert: ...
    @property
    def state(self) -> AlertState: ...
    @property
    def told(self) -> Told | None: ...


#: ``offline_held`` values: what keeps a FleetClusterOffline from reaching the reactor.
STORM_GUARD, SILENCE = "storm_guard", "silence"
HOLDS = (STORM_GUARD, SILENCE)

#: A reason is a short comma-separated list of the exporter's reason words; never more.
MAX_REASON_CHARS = 200


@dataclass(frozen=True, slots=True)
class Told:
    """A reason and its class as an alert's annotations say them (None: empty)."""

    reason: str | None
    reason_class: str | None


def told(annotations: Mapping[str, str] | None) -> Told | None:
    """The reason the annotations tell; None when they carry no ``reason`` at all."""
    if not annotations or "reason" not in annotations:
        return None
    return Told(_words(annotations["reason"]), _words(annotations.get("reason_class", "")))


def _words(text: str) -> str | None:
    """Printable characters only (PostgreSQL's text refuses NUL; a terminal shows no
    control character), bounded; None when nothing is left."""
    kept = "".join(ch for ch in text if ch.isprintable()).strip()
    return clip(kept, MAX_REASON_CHARS) or None


@dataclass(frozen=True, slots=True)
class ClusterNote:
    """What to write for one cluster: the reason (``told`` None: keep it) and, when
    ``sets_held``, the hold."""

    cluster: str
    told: Told | None
    held: str | None = None
    sets_held: bool = False


def webhook_notes(
    signals: Iterable[tuple[str, StatusAlert, bool, int, Told | None]],
    states: Mapping[str, ClusterAlertState],
) -> list[ClusterNote]:
    """The notes of one webhook: ``signals`` are (cluster, alert, firing, startsAt, told),
    ``states`` each cluster's state after the notification was folded."""
    best: dict[str, tuple[int, Told | None, bool]] = {}
    for cluster, alert, firing, starts_at, said in signals:
        state = states.get(cluster)
        if not firing or state is None:
            continue
        live = state.online if alert is StatusAlert.ONLINE else state.offline
        if live is None or not live.firing or live.starts_at != starts_at:
            continue
        offline = alert is StatusAlert.OFFLINE
        held = best.get(cluster)
        if held is None or starts_at >= held[0]:
            best[cluster] = (starts_at, said, offline or (held is not None and held[2]))
    return [
        ClusterNote(cluster, said, None, sets_held=offline)
        for cluster, (_, said, offline) in best.items()
        if said is not None or offline
    ]


@dataclass(frozen=True, slots=True)
class Listed:
    """A status alert as reconciliation lists it."""

    cluster: str
    alert: StatusAlert
    starts_at: int
    inhibited: bool
    silenced: bool
    told: Told | None


def listing_notes(listed: Iterable[Listed]) -> list[ClusterNote]:
    """The notes of one reconciliation (every Alertmanager's listing together)."""
    latest: dict[str, Listed] = {}
    held: dict[str, str | None] = {}
    for item in listed:
        if item.told is not None:
            known = latest.get(item.cluster)
            if known is None or item.starts_at > known.starts_at:
                latest[item.cluster] = item
        hold = held.get(item.cluster)
        if item.alert is StatusAlert.OFFLINE and hold != STORM_GUARD:
            if item.inhibited:
                hold = STORM_GUARD
            elif item.silenced:
                hold = SILENCE
        held[item.cluster] = hold
    return [
        ClusterNote(name, latest[name].told if name in latest else None, hold, sets_held=True)
        for name, hold in sorted(held.items())
    ]


def shown_hold(status: Status, held: str | None) -> str | None:
    """The hold the API shows: none while the reactor reads the cluster OFFLINE anyway."""
    return None if status is Status.OFFLINE or held not in HOLDS else held


def held_note(status: Status, held: str | None) -> str | None:
    """The sentence the API and ``fleetwatch status`` show, or None (nothing held back,
    or the cluster is OFFLINE for the reactor anyway)."""
    held = shown_hold(status, held)
    if held is None:
        return None
    if held == STORM_GUARD:
        return (
            "FleetClusterOffline fires for it but the storm guard (FleetProbeStorm: much of "
            "the fleet failing at once) inhibits it: the reactor does not treat it as OFFLINE, "
            "pauses nothing and allows deployments until the storm ends"
        )
    return (
        "FleetClusterOffline fires for it but is silenced in Alertmanager (planned "
        "maintenance?): the reactor does not treat it as OFFLINE, pauses nothing and allows "
        "deployments while the silence lasts"
    )


def note_rows(
    notes: Sequence[ClusterNote],
    records: Mapping[str, tuple[int, str | None, str | None, str | None]],
) -> list[tuple[int, str | None, str | None, str | None]]:
    """(id, reason, class, held) of each cluster whose row the notes change; ``records``:
    (id, reason, class, held) as stored, by name."""
    rows = []
    for note in notes:
        row = records.get(note.cluster)
        if row is None:
            continue
        cid, reason, kind, held = row
        if note.told is not None:
            reason, kind = note.told.reason, note.told.reason_class
        if note.sets_held:
            held = note.held
        if (cid, reason, kind, held) != row:
            rows.append((cid, reason, kind, held))
    return rows


def notes_for(
    known: Mapping[str, ClusterRecord],
    folded: Mapping[str, ClusterAlertState],
    signals: Iterable[SignalLike],
) -> list[tuple[int, str | None, str | None, str | None]]:
    """:func:`note_rows` of a webhook's signals: ``known`` the clusters as read in the
    transaction, ``folded`` the states of those it changed."""
    states = {name: folded.get(name, c.state) for name, c in known.items()}
    said = ((s.cluster, s.alert, s.state.firing, s.state.starts_at, s.told) for s in signals)
    return note_rows(webhook_notes(said, states), stored(known.values()))


def stored(
    clusters: Iterable[ClusterRecord],
) -> dict[str, tuple[int, str | None, str | None, str | None]]:
    """(id, reason, class, held) of each cluster as stored, by name."""
    return {c.name: (c.id, c.reason, c.reason_class, c.offline_held) for c in clusters}


def write_notes(store: Store, notes: Sequence[ClusterNote]) -> None:
    """Reconciliation's notes, in one transaction over the clusters they name as they are
    now (a webhook may have changed them since the listing was read)."""
    with store.write() as tx:
        known = tx.clusters_named(sorted({note.cluster for note in notes}))
        tx.set_notes(note_rows(notes, stored(known.values())))
