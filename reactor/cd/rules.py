"""The cascade where deployments happen, as pure rules: pause, resume, or leave alone.

``reactor.statemachine`` decides which apps an outage degrades and which it restores; the
store holds the result. A Flux or Argo CD object mirrored as an app (``reactor.cd.mirror``)
must then be made to match it, and this module says how, from two things only:

- the store's view of the app (:class:`StoreView`): its cluster's status and open outage,
  and whether that outage degraded the app (the app's ``outage_id``, which the store only
  ever sets to the open outage of the app's own cluster, on apps DEGRADED for
  ``cluster_offline``);
- the object as the management cluster last showed it (:class:`Observed`): paused or
  not, and fleetwatch's mark, the annotation ``fleetwatch.io/paused-by-outage: <outage
  id>`` that fleetwatch writes with every pause it makes.

:func:`decide` answers with a :class:`Decision`: a :class:`Verb` for the object (the
patch itself is ``reactor.cd.patches``'), and maybe a change of the store to make first.
It is called for every mirrored app whenever the store or the object changes and at every
resync, so the rules are level-triggered: they look at how things are, never at what
happened, and an action lost to an API error is simply decided again.

The app is **in the outage** when its cluster has an open outage and that outage degraded
it. Then:

=================  ===============  ============================================================
object paused      mark             decision
=================  ===============  ============================================================
no                 none             PAUSE, marked with the outage: the outage just opened, or
                                    the object's owner re-applied it and dropped both pause and
                                    mark (an ApplicationSet without ``preservedFields``)
no                 this outage      by its owner (the pause's field owned by a controller, a
                                    Flux parent's forced apply): PAUSE again; by a person:
                                    their choice stands, the app leaves the outage in the store
                                    (:attr:`Decision.leave_outage`, first) and DROP_MARK
no                 another one      PAUSE, marked with this outage (the mark is a leftover)
yes                this outage      nothing
yes                none             nothing: paused by someone else, before or during the
                                    outage, and so never resumed by fleetwatch
yes                another one      REMARK: our pause of an older outage (one that closed
                                    before the object was resumed) carries on for this one
=================  ===============  ============================================================

Otherwise (no open outage, or one that did not degrade the app):

=================  ===============  ============================================================
object paused      mark             decision
=================  ===============  ============================================================
either             none             nothing: what is paused was paused by someone else
no                 any              DROP_MARK: resumed by a person (or its owner) after the
                                    pause; nothing of ours is left to undo
yes                any              RESUME when the app is DEPLOYED (the store restored it, or
                                    a later decision deployed it) and the cluster is not
                                    OFFLINE; otherwise nothing yet (the store holds the app
                                    DEGRADED for another reason, or the cluster is down)
=================  ===============  ============================================================

So an outage pauses what it degraded and marks it; its end resumes exactly what still
carries a mark, so what a person paused is never resumed and what a person resumed keeps
running; a pause an owner undid is applied again while the outage lasts; no object is
ever resumed while its cluster is OFFLINE; and without an outage (a storm the guard
inhibited, a silenced cluster) nothing is paused.

**A cluster Secret** (``--cd.argocd.pause cluster-secret``): Argo CD is paused once per
cluster, by the same annotation on its Argo CD cluster Secret, which stops every
Application of that cluster at once. The Secret is decided by the same table, as one app
standing for the cluster's mirrored Applications (:func:`secret_view`): it is in the
outage while any of them is (the outage degraded them), so it is paused when the first
outage opens and only then, and a person's resume of the Secret takes all of them out of
the outage; it is resumed once none of them is in an outage, the cluster is not OFFLINE,
and one of them is DEPLOYED (or none is left: a pause of ours is never left behind for
want of an app). A Secret pauses all or nothing, so an Application the store holds
DEGRADED for another reason runs again with the others when one of them is restored;
per Application, it would stay paused. The Applications themselves are then decided by
:func:`decide_without_pausing`: nothing of theirs is paused, and a pause of ours left on
one (made before the mode changed) is finished as the table says.

Why the store changes first on a person's resume: the mark is the only trace that the
object was paused by us, and once it is dropped the object looks like one whose owner
reverted both. With the app out of the outage before the mark goes, a crash between the
two leaves an app outside the outage with its mark still on, which is decided again as
DROP_MARK; the other order would pause it again against the person's choice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from reactor.statemachine import AppStatus, Status


class Verb(StrEnum):
    """What to do to the object."""

    NOTHING = "nothing"
    PAUSE = "pause"  #: pause it, and mark it with the outage
    RESUME = "resume"  #: resume it and drop the mark (Flux: reconcile at once)
    DROP_MARK = "drop_mark"  #: only drop the mark; the pause is not ours to change
    REMARK = "remark"  #: keep the pause, mark it with this outage


@dataclass(frozen=True, slots=True)
class StoreView:
    """What the store says of a mirrored app and its cluster."""

    cluster_status: Status
    #: the cluster's open outage, None when there is none
    open_outage: int | None
    app_status: AppStatus
    #: the outage that degraded the app (always the cluster's open one), None when none
    app_outage: int | None = None

    @property
    def in_outage(self) -> bool:
        return self.open_outage is not None and self.app_outage == self.open_outage


@dataclass(frozen=True, slots=True)
class Observed:
    """The object, as last seen in the management cluster."""

    paused: bool
    mark: str | None = None
    #: not paused, and the pause's field is owned by the controllers that apply it only
    resumed_by_owner: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    verb: Verb
    #: the mark to write (PAUSE, REMARK): the open outage's id
    mark: str | None = None
    #: take the app out of this outage in the store, before touching the object
    leave_outage: int | None = None
    #: why, in words (logs, tests)
    why: str = ""


def decide(view: StoreView, seen: Observed) -> Decision:
    """What to do so the object matches the store (module docstring)."""
    if view.in_outage:
        assert view.open_outage is not None
        return _in_outage(str(view.open_outage), view.open_outage, seen)
    if seen.mark is None:
        return Decision(Verb.NOTHING, why="not paused by fleetwatch")
    if not seen.paused:
        return Decision(Verb.DROP_MARK, why="resumed by someone else; the mark is a leftover")
    if view.cluster_status is Status.OFFLINE:
        return Decision(Verb.NOTHING, why="never resumed while its cluster is OFFLINE")
    if view.app_status is not AppStatus.DEPLOYED:
        return Decision(Verb.NOTHING, why=f"the store holds the app {view.app_status.value}")
    return Decision(Verb.RESUME, why=f"outage {seen.mark} is over for this app")


def _in_outage(outage: str, outage_id: int, seen: Observed) -> Decision:
    if seen.paused:
        if seen.mark is None:
            return Decision(Verb.NOTHING, why="paused by someone else: never resumed by us")
        if seen.mark == outage:
            return Decision(Verb.NOTHING, why=f"paused for outage {outage}")
        return Decision(Verb.REMARK, outage, why=f"our pause of outage {seen.mark} carries on")
    if seen.mark is None:
        return Decision(Verb.PAUSE, outage, why=f"outage {outage} degraded it")
    if seen.mark != outage:
        return Decision(Verb.PAUSE, outage, why=f"outage {outage}; stale mark {seen.mark}")
    if seen.resumed_by_owner:
        return Decision(Verb.PAUSE, outage, why="its owner undid the pause: applied again")
    return Decision(
        Verb.DROP_MARK,
        leave_outage=outage_id,
        why="resumed by a person during the outage: their choice stands",
    )


def decide_without_pausing(view: StoreView, seen: Observed) -> Decision:
    """The rules for an object fleetwatch no longer pauses itself (an Application whose
    cluster Secret carries the pause): never PAUSE nor REMARK; a pause of ours found on it
    is resumed, and a mark dropped, as the table says outside an outage."""
    return decide(replace(view, app_outage=None), seen)


#: The verbs that write an outage's mark, wanted only while that outage is open.
NEEDS_OPEN_OUTAGE = frozenset({Verb.PAUSE, Verb.REMARK})


def still_wanted(decision: Decision, open_outages: Collection[int]) -> bool:
    """Is ``decision`` still to be sent, the store's open outages being ``open_outages``? A
    PAUSE or REMARK writes the mark of the outage it was decided for, and is sent only
    while that outage is open: one that closed since (a recovery another replica took)
    would pause an object of a cluster that is back. Read again after every wait before
    the write (``reactor.cd.fence``); the other verbs do not depend on an open outage."""
    if decision.verb not in NEEDS_OPEN_OUTAGE:
        return True
    return (
        decision.mark is not None
        and decision.mark.isdigit()
        and (int(decision.mark) in open_outages)
    )


def secret_view(
    cluster_status: Status,
    open_outage: int | None,
    apps: Iterable[tuple[AppStatus, int | None]],
) -> StoreView:
    """The store's view of a cluster Secret: one app standing for the cluster's mirrored
    Applications, given as (status, outage) (module docstring)."""
    apps = list(apps)
    if open_outage is not None and any(outage == open_outage for _, outage in apps):
        return StoreView(cluster_status, open_outage, AppStatus.DEGRADED, open_outage)
    deployed = not apps or any(status is AppStatus.DEPLOYED for status, _ in apps)
    status = AppStatus.DEPLOYED if deployed else AppStatus.DEGRADED
    return StoreView(cluster_status, open_outage, status)
