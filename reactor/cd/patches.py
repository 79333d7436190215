"""The patches that carry out a decision of ``reactor.cd.rules``, as data.

Every patch is a JSON merge patch (RFC 7386, ``application/merge-patch+json``: custom
resources refuse a strategic merge patch with 415) and carries the ``resourceVersion`` of
the object the decision was taken on, as ``metadata.resourceVersion``: the API server
takes it as a precondition and answers ``409 Conflict`` when the object changed since, so
no patch ever lands on a state the rules did not see. The next evaluation (the watch
brings the new version) decides again.

=============  =====================================  =========================================
verb           Flux (Kustomization, HelmRelease)      Argo CD (Application, or cluster Secret)
=============  =====================================  =========================================
PAUSE          ``spec.suspend: true``, the mark       ``skip-reconcile: "true"``, the mark
RESUME         ``spec.suspend: false``, the mark      ``skip-reconcile`` and the mark removed
               removed, ``reconcile.fluxcd.io/
               requestedAt`` set: ours, a reconcile
               request as ``flux reconcile`` writes
               it (``flux resume`` sets only
               ``spec.suspend``, then waits)
DROP_MARK      the mark removed                       the mark removed
REMARK         the mark set to the open outage        the mark set to the open outage
=============  =====================================  =========================================

Sent with ``fieldManager=fleetwatch``, so the fields it sets are owned by that name in
``managedFields``, apart from people and controllers (``reactor.cd.objects`` reads that).

Pure: a decision and an object in, a dict out.
"""

from __future__ import annotations

from typing import Any, Protocol

from reactor.cd.objects import FLUX, MARK, REQUESTED_AT, SKIP_RECONCILE, SUSPEND, CdKind
from reactor.cd.rules import Decision, Verb

#: The field manager of every write.
FIELD_MANAGER = "fleetwatch"


class Patched(Protocol):
    """What a patch needs of the object: a ``CdObject`` or a ``ClusterSecret``."""

    @property
    def kind(self) -> CdKind: ...
    @property
    def resource_version(self) -> str: ...


def patch_for(decision: Decision, obj: Patched, requested_at: str) -> dict[str, Any] | None:
    """The merge patch of ``decision`` on ``obj``; None for NOTHING.

    ``requested_at``: the value of Flux's reconcile request when resuming (any new value
    works; ``flux reconcile`` writes the time, RFC 3339).
    """
    verb = decision.verb
    if verb is Verb.NOTHING:
        return None
    annotations: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    flux = obj.kind.source == FLUX
    if verb is Verb.PAUSE:
        annotations[MARK] = decision.mark
        if flux:
            spec[SUSPEND] = True
        else:
            annotations[SKIP_RECONCILE] = "true"
    elif verb is Verb.RESUME:
        annotations[MARK] = None
        if flux:
            spec[SUSPEND] = False
            annotations[REQUESTED_AT] = requested_at
        else:
            annotations[SKIP_RECONCILE] = None
    elif verb is Verb.DROP_MARK:
        annotations[MARK] = None
    else:  # REMARK
        annotations[MARK] = decision.mark
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": obj.resource_version, "annotations": annotations}
    }
    if spec:
        patch["spec"] = spec
    return patch
