"""The list+watch of the mirrored kinds: ``discovery.informer``'s reflectors, on CRDs.

One :class:`CdWatch` per kind turned on (``--cd.flux``: Kustomizations and HelmReleases;
``--cd.argocd``: Applications), cluster-wide: an object's destination is in its spec, which
no selector can filter on, so every object is listed and ``reactor.cd.objects`` keeps those
that deploy to a remote cluster. The informer pages, resumes, relists after ``410 Gone``
and backs off exactly as it does for Secrets.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor.cd.objects import CdKind
from reactor.cd.settings import CdSettings


@dataclass(frozen=True)
class CdWatch:
    """One kind's list+watch (``discovery.informer.Watched``)."""

    cd_kind: CdKind
    namespace: str | None = None
    label_selector: str = ""
    field_selector: str = ""

    @property
    def kind(self) -> str:
        return self.cd_kind.plural

    @property
    def path(self) -> str:
        return self.cd_kind.path(self.namespace)

    def __str__(self) -> str:
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        return f"{self.cd_kind.kind} objects in {where}"


def cd_watches(settings: CdSettings) -> list[CdWatch]:
    return [CdWatch(kind) for kind in settings.kinds]
