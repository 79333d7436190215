"""Objects fleetwatch paused that no cluster of the store holds any more: resumed.

An object carries fleetwatch's mark from the pause of an outage until the outage ends. If
its cluster leaves the store meanwhile (``DELETE /clusters/NAME?force=true`` of a
decommissioned or renamed cluster; discovery itself never deletes one), or its destination
changes to one no cluster of the store matches, the object is no longer an app: no
outage of the store can end, and the rules of ``reactor.cd.rules`` never look at it
again. Left alone it would stay paused for ever, a silent stop of its delivery that
nothing shows.

The same holds for an Argo CD cluster Secret paused in ``--cd.argocd.pause
cluster-secret`` mode whose cluster left the store: it names no cluster any more, and
nothing would ever resume it.

So fleetwatch resumes it (and drops the mark), with a warning and a counter: it paused
the object for an outage it can no longer see end, and what it cannot see any more it
must not keep stopped. What a person paused (no mark) is never touched, as everywhere.
Keeping it paused and alerting was the other choice; it pages someone to do by hand what
has only one sensible outcome, and the cluster's outage is not watched any more.

**Not too soon.** An object is an orphan only after it has been one for a grace period
(the resync interval): the store may lack its cluster for a moment for reasons that
pass (a new database whose clusters discovery is still listing, a Secret moved to a new
name). :class:`Orphans` remembers since when each has been one.

Pure: objects and names in, objects out; the caller gives the time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from reactor.cd.clustersecrets import ClusterSecret
from reactor.cd.objects import CdObject, Unreadable
from reactor.cd.rules import Decision, Verb

#: What can be left paused: a Flux or Argo CD object, or an Argo CD cluster Secret.
Pausable = CdObject | ClusterSecret

#: What the actuator does to an orphan: resume it, as the rules resume at an outage's end.
RESUME_ORPHAN = Decision(Verb.RESUME, why="its cluster left the store: no outage can end its pause")


class Orphans:
    """Which paused, marked objects have had no mirrored app for the grace period."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._since: dict[str, float] = {}

    def due(
        self,
        objects: Mapping[str, Pausable | Unreadable],
        mirrored: Collection[str],
        now: float,
    ) -> list[Pausable]:
        """The orphans of ``objects`` (by app name, or a Secret's key) to resume ``now``;
        ``mirrored``: the names of the store's mirrored apps after this pass's mirror (the
        keys of the Secrets that name a cluster of the store)."""
        current = {
            name: obj
            for name, obj in objects.items()
            if isinstance(obj, Pausable)
            and obj.paused
            and obj.mark is not None
            and name not in mirrored
        }
        self._since = {name: self._since.get(name, now) for name in current}
        return [obj for name, obj in current.items() if now - self._since[name] >= self.grace_s]

    def reset(self) -> None:
        """Forget every start (a new leader counts the grace period again)."""
        self._since.clear()


def orphan_key(obj: Pausable) -> str:
    """An orphan's name in the actuator's books: its app's name, or a Secret's key."""
    return obj.app_name if isinstance(obj, CdObject) else obj.key
