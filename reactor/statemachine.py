"""The rules of fleetwatch, as pure code: cluster statuses, outages, the cascade and the restore.

Read this module to know what the reactor does; everything else is plumbing (parsing the
webhook, storing rows, serving HTTP). Nothing here does I/O, so every rule is tested as a
table of inputs and expected outputs (tests/reactor/test_statemachine.py).

Status signals. Alertmanager tells us about two alerts per cluster:
``FleetClusterOnline`` fires while it is ONLINE, ``FleetClusterOffline`` while it is
OFFLINE. For each of the two we keep the latest thing we know: *firing since startsAt* or
*resolved at endsAt*. An alert instance is named by its ``startsAt`` (to the millisecond,
what every path carries: ``reactor.alertmanager.signals``); a later ``startsAt`` is a newer
instance.
Within one instance, a resolution is newer than "firing", and there are two kinds of it:

* *resolved by Alertmanager* (a webhook saying so) is final: nothing more about that
  instance is news, not even a late copy of its "firing" (an HA peer's, a retry).
* *inferred*: a reconciliation found the instance listed by no Alertmanager and resolved
  it (``reactor.reconcile``). Absence proves less: an Alertmanager restarted empty, a
  wrong ``--alertmanager.url``. So it is provisional: the same instance seen firing again
  (re-sent, repeated every ``repeat_interval``, listed again) revives it, and
  Alertmanager's own resolution replaces it (with the true ``endsAt``).

The first resolution of either kind heard of an instance stays: a second one of the same
kind, with another ``endsAt`` (another replica's reconciliation), is no news. Anything not
newer than what we hold is ignored, so duplicates, repeats, out-of-order deliveries and
several reactors reconciling the same alerts change nothing twice.

The two alerts are exclusive (the rules never fire both at once), so a firing alert whose
``startsAt`` is older than the latest ``startsAt`` known for the other alert has ended,
whatever was delivered: the other one began after it. The status of a cluster is the
status of the firing alert that has not ended that way, UNKNOWN when there is none. So a
lost "resolved" of the older alert never matters: after "Offline resolved", with the old
Online's "resolved" lost, the cluster is UNKNOWN, never ONLINE from the older alert. On a
tie (both firing since the same instant, which the rules never produce) OFFLINE wins: it
is the safe answer for the gate.

Outages and the cascade:

* An outage opens when the cluster is OFFLINE, no outage is open, and it had been ONLINE
  before this OFFLINE: seen ONLINE since the last outage (``was_online``), or known to
  have been ONLINE before it (an Online instance, firing or resolved, older than the
  Offline one). A passing UNKNOWN does not clear ``was_online``; a cluster never seen
  ONLINE opens no outage (the cascade never starts from UNKNOWN). So an ONLINE followed
  by an OFFLINE opens the same outage however the two alerts are batched into
  notifications and in whatever order those arrive. (A flap already over when we first
  hear of it, an OFFLINE and a later ONLINE learnt together, opens none: by then there is
  nothing to protect.) Opening it degrades the apps DEPLOYED on the cluster
  (:class:`DegradeApps`).
* While an outage is open, each time the cluster becomes OFFLINE again (after a passing
  UNKNOWN, during which deployments were allowed) the apps DEPLOYED there join the same
  outage: no app stays DEPLOYED on an OFFLINE cluster.
* The outage closes when the cluster is ONLINE with a ``startsAt`` later than the outage's
  start: the apps it degraded that are still DEGRADED for ``cluster_offline`` on that
  cluster go back to DEPLOYED (:class:`RestoreApps`). Nothing else restores anything: an
  OFFLINE resolved (by Alertmanager or inferred) leaves the outage open, so an OFFLINE
  revived finds it open and its apps deployed meanwhile join it.

What the app effects mean, exactly (the store runs them as one set-based statement each):

* :class:`DegradeApps` - every app of the cluster with status DEPLOYED becomes DEGRADED with
  reason ``cluster_offline`` and is remembered as a member of the open outage.
* :class:`RestoreApps` - every member of the open outage that is still on that cluster and
  still DEGRADED with reason ``cluster_offline`` becomes DEPLOYED (reason cleared).
* Any other change of an app (deployment, reassignment, a health report) takes it out of
  whatever outage it was in, so a recovery never undoes a later decision about it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

# Re-exported: the reactor's modules and tests import them from here.
from fleetwatch.common.contract import Status as Status
from fleetwatch.common.contract import StatusAlert as StatusAlert

#: What a time is cut to, in microseconds: the millisecond, the precision of Alertmanager's
#: API v2 (go-openapi's ``strfmt.DateTime``), which its webhooks exceed.
PRECISION_US = 1000


def to_precision(us: int) -> int:
    """Microseconds since the epoch, cut to :data:`PRECISION_US` (cut, not rounded, as Go's
    formatting does: ``.123999`` is ``.123``)."""
    return us - us % PRECISION_US


class AppStatus(StrEnum):
    """Status of an app."""

    PENDING = "PENDING"  #: created or reassigned, not deployed yet
    DEPLOYED = "DEPLOYED"
    DEGRADED = "DEGRADED"  #: always with a reason


#: The reason the cascade writes; only apps degraded with it (by an outage) are restored.
CLUSTER_OFFLINE = "cluster_offline"


@dataclass(frozen=True, slots=True)
class AlertState:
    """What we know of one status alert: firing since ``starts_at``, or resolved at ``ends_at``.

    Times are microseconds since the Unix epoch, whole milliseconds (see
    ``reactor.alertmanager.signals.parse_time``).
    """

    firing: bool
    starts_at: int
    ends_at: int | None = None
    #: resolved because no Alertmanager listed it any more, not because one said so:
    #: provisional, the same instance seen firing again revives it
    inferred: bool = False


def is_newer(candidate: AlertState, known: AlertState | None) -> bool:
    """Whether ``candidate`` is news over ``known`` (the module docstring's rules).

    Not a total order: an inferred resolution and the same instance firing each replace the
    other, as often as a reconciliation and Alertmanager disagree; everything else moves
    one way only (a later instance; within one, firing, then resolved, then final).
    """
    if known is None or candidate.starts_at > known.starts_at:
        return True
    if candidate.starts_at < known.starts_at:
        return False
    if known.firing:
        return not candidate.firing  # resolved, whichever way
    if known.inferred:
        return not candidate.inferred  # revived by firing, or made final by Alertmanager
    return False  # Alertmanager's resolution is final


@dataclass(frozen=True, slots=True)
class ClusterAlertState:
    """Everything the rules need to know about one cluster between two notifications."""

    online: AlertState | None = None
    offline: AlertState | None = None
    #: seen ONLINE since the last outage opened (or ever, when there was none)
    was_online: bool = False
    #: ``startsAt`` of the OFFLINE signal that opened the current outage; None: none open
    outage_since: int | None = None

    @property
    def status(self) -> Status:
        return status_of(self.online, self.offline)[0]

    @property
    def status_since(self) -> int | None:
        return status_of(self.online, self.offline)[1]


def status_of(online: AlertState | None, offline: AlertState | None) -> tuple[Status, int | None]:
    """The status and since when: the firing alert that has not ended wins.

    A firing alert has ended when the other alert has a later ``startsAt`` (they are
    exclusive). UNKNOWN's "since" is the latest ``endsAt`` of the two (when the last one
    resolved), or None when none is known.
    """
    if offline is not None and _live(offline, online):
        return Status.OFFLINE, offline.starts_at
    if online is not None and _live(online, offline):
        return Status.ONLINE, online.starts_at
    ends = [a.ends_at for a in (online, offline) if a is not None and a.ends_at is not None]
    return Status.UNKNOWN, max(ends) if ends else None


def _live(alert: AlertState, other: AlertState | None) -> bool:
    """Firing, and not ended by a later instance of the other alert."""
    return alert.firing and (other is None or alert.starts_at >= other.starts_at)


def _online_before(online: AlertState | None, offline: AlertState) -> bool:
    """We know of an ONLINE (firing or resolved) that began before this OFFLINE."""
    return online is not None and online.starts_at < offline.starts_at


# Effects: what the store must do, in this order, in the same transaction.


@dataclass(frozen=True, slots=True)
class OpenOutage:
    """Record a new outage of the cluster, started at ``started_at`` (the OFFLINE startsAt)."""

    started_at: int


@dataclass(frozen=True, slots=True)
class DegradeApps:
    """DEPLOYED apps of the cluster -> DEGRADED (``cluster_offline``), in the open outage."""


@dataclass(frozen=True, slots=True)
class RestoreApps:
    """Members of the open outage still DEGRADED (``cluster_offline``) there -> DEPLOYED."""


@dataclass(frozen=True, slots=True)
class CloseOutage:
    """Close the open outage; ``closed_at`` is the startsAt of the ONLINE signal that closed it."""

    closed_at: int


Effect = OpenOutage | DegradeApps | RestoreApps | CloseOutage


@dataclass(frozen=True, slots=True)
class Transition:
    state: ClusterAlertState
    effects: tuple[Effect, ...]
    #: False when nothing in the updates was newer than what we knew (duplicates, stale)
    changed: bool


def apply(
    state: ClusterAlertState, updates: Iterable[tuple[StatusAlert, AlertState]]
) -> Transition:
    """Fold one notification's updates for one cluster into its state; say what to do.

    All the updates of one notification are folded first and the status is evaluated once,
    so a notification that carries both an OFFLINE and a later ONLINE for the same cluster
    (a flap already over) opens no outage. An ONLINE and a later OFFLINE in one
    notification do open one: the ONLINE shows the cluster had been ONLINE before.
    """
    online, offline = state.online, state.offline
    for alert, update in updates:
        if alert is StatusAlert.ONLINE:
            if is_newer(update, online):
                online = update
        elif is_newer(update, offline):
            offline = update
    if online == state.online and offline == state.offline:
        return Transition(state, (), changed=False)

    before = state.status
    status, _ = status_of(online, offline)
    was_online, outage_since = state.was_online, state.outage_since
    effects: list[Effect] = []
    if status is Status.ONLINE:
        assert online is not None
        if outage_since is not None and online.starts_at > outage_since:
            effects += [RestoreApps(), CloseOutage(closed_at=online.starts_at)]
            outage_since = None
        was_online = True
    elif status is Status.OFFLINE:
        assert offline is not None
        if outage_since is None:
            if was_online or _online_before(online, offline):
                outage_since = offline.starts_at
                was_online = False
                effects += [OpenOutage(started_at=outage_since), DegradeApps()]
        elif before is not Status.OFFLINE:
            effects.append(DegradeApps())
    new_state = replace(
        state, online=online, offline=offline, was_online=was_online, outage_since=outage_since
    )
    return Transition(new_state, tuple(effects), changed=True)
