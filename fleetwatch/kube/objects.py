"""What the client knows of every Kubernetes object, whatever its kind.

An object is its JSON (:data:`KubeObject`): the client lists, watches, keeps and hands it
on as the API server sent it (less what a transform drops), and the caller, which knows
the kind (discovery's Secrets, the CD integration's Flux and Argo CD objects), reads it.
Names the API conventions give every object are spelled here, once.

Pure: no I/O, so that pure parsers (``reactor.cd.clustersecrets``) may import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["LAST_APPLIED", "KubeObject", "ReadOnce", "Stored", "as_sent"]

T = TypeVar("T")
Obj = TypeVar("Obj", bound=Mapping[str, Any])

#: One object as the API server sends it, decoded from JSON.
KubeObject = dict[str, Any]

#: What an informer keeps of each object of its kind (a transform's result): any mapping
#: with the object's ``metadata`` (``uid``, ``resourceVersion``), whatever the kind.
Stored = TypeVar("Stored", bound=Mapping[str, Any])


def as_sent(obj: KubeObject) -> Any:
    """The identity transform: the object kept as the API server sent it."""
    return obj


#: ``kubectl apply``'s copy of the whole object in an annotation, ``data`` included (a
#: Secret's credentials a second time): never kept.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class ReadOnce(Generic[T]):
    """What a caller made of each object, by ``uid``, made again only when the object's
    ``resourceVersion`` changed.

    The informer hands every object it holds at each pass (thousands of Secrets, every CD
    object), of which a handful changed: an object is read (its kubeconfig parsed, its
    destination resolved) once per version, and one gone is forgotten at the next
    :meth:`update`. The one cache of the kind, for discovery's Secrets
    (``fleetwatch.discovery.apisource.SecretReads``) and the CD objects
    (``reactor.cd.actuator``) alike. Not thread-safe: one caller at a time.
    """

    __slots__ = ("_reads",)

    def __init__(self) -> None:
        #: uid -> (resourceVersion, what ``read`` made of it)
        self._reads: dict[str, tuple[str, T]] = {}

    def __len__(self) -> int:
        return len(self._reads)

    def update(
        self,
        objects: Mapping[str, Obj],
        read: Callable[[Obj, T | None], T],
    ) -> list[T]:
        """Every object of ``objects`` (by ``uid``) as ``read`` made it; ``read`` is called
        with an object new or changed and what it made of the object's last version (None
        for a new one), which a caller may keep from (a last good kubeconfig)."""
        reads: dict[str, tuple[str, T]] = {}
        for uid, obj in objects.items():
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            known = self._reads.get(uid)
            if known is not None and known[0] == version:
                reads[uid] = known
            else:
                reads[uid] = (version, read(obj, None if known is None else known[1]))
        self._reads = reads  # an object gone is dropped here
        return [made for _, made in reads.values()]
