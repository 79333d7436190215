"""Which mirrored rows a replica may write: the rule, pure.

Every reactor replica on one store sees every mirrored row, but it lists and watches only
the kinds its flags turn on (``--cd.flux``: Kustomization and HelmRelease; ``--cd.argocd``:
Application). A row is the mirror of one object of one kind, named
``SOURCE:KIND/NAMESPACE/NAME``. Planned against its own objects alone, a replica would
find every row of a kind it does not watch "gone" and delete it: a dry run beside the
acting replica deleted the paused Applications of an open outage at every resync, and
the outage's end then restored none of them; a reactor restarted without ``--cd.argocd``
would do the same. So each row falls under one :class:`Scope`, by its kind and the
replica's part:

=============  ============================  ===============================================
replica        the row's kind                scope: what the replica does with the row
=============  ============================  ===============================================
acting         one it watches                OWN: mirrors it (inserts, moves, updates what was
                                             seen, deletes it once its object is gone) and
                                             acts on its object
acting         one it does not watch, or     UNWATCHED: leaves it exactly as it is, counts
               none this version knows       it, and names it while fleetwatch's pause is on
                                             it (nothing else will resume that object)
dry run        one it watches                PREVIEW: the mirror is planned and applied in
                                             memory only, so the rules decide as if it were
                                             written; logged and counted, never written
dry run        one it does not watch         UNWATCHED, as for an acting replica
=============  ============================  ===============================================

A replica that waits for the Lease reads no row, so it has no scope. The store's write
statements take the watched kinds as well (``reactor.store.sql``): a row outside them is
never changed even if a plan named it.

Why a row of an unwatched kind stays rather than goes: the kind may be watched by another
replica of the same store, or again after a restart; and its row is the only record of
which objects an outage paused. Deleted, an outage's end would restore none of them and
their objects would stay paused with nothing to say so.

Pure: names in, a scope out.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum

from reactor.cd.objects import KINDS, CdKind

#: The ``kind`` label of a row whose name matches no kind of this version (written by a
#: newer one): bounded, unlike the name itself.
OTHER_KIND = "other"


class Scope(Enum):
    OWN = "own"
    PREVIEW = "preview"
    UNWATCHED = "unwatched"


def prefix_of(kind: CdKind) -> str:
    """The start of every row name of ``kind``: ``SOURCE:KIND/``."""
    return f"{kind.source}:{kind.kind}/"


def kind_of(name: str) -> str:
    """The kind of a mirrored row, by its name; :data:`OTHER_KIND` when no kind of this
    version reads it."""
    for kind in KINDS:
        if name.startswith(prefix_of(kind)):
            return kind.kind
    return OTHER_KIND


def scope_of(name: str, watched: Collection[CdKind], dry_run: bool) -> Scope:
    """The module docstring's table: what a replica watching ``watched`` (a dry run or
    not) may do with the row named ``name``."""
    if not any(name.startswith(prefix_of(kind)) for kind in watched):
        return Scope.UNWATCHED
    return Scope.PREVIEW if dry_run else Scope.OWN
