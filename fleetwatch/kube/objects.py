"""What the client knows of every Kubernetes object, whatever its kind.

An object is its JSON (:data:`KubeObject`): the client lists, watches, keeps and hands it
on as the API server sent it (less what a transform drops), and the caller, which knows
the kind (discovery's Secrets, the CD integration's Flux and Argo CD objects), reads it.
Names the API conventions give every object are spelled here, once, and what an informer
keeps of an object for memory (:func:`slim`), each caller saying what more it needs.

Pure: no I/O, so that pure parsers (``reactor.cd.clustersecrets``) may import it.
:class:`ReadOnce`'s loop gives way to requests being answered (``fleetwatch.common.
foreground``): that changes when it runs, never what it answers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Generic, TypeVar

from fleetwatch.common.foreground import paced

__all__ = ["LAST_APPLIED", "KubeObject", "ReadOnce", "Stored", "as_sent", "owners_of", "slim"]

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


def owners_of(metadata: Mapping[str, Any], path: tuple[str, ...]) -> tuple[str, ...]:
    """The field managers that own the field at ``path`` (``metadata.managedFields``)."""
    entries = metadata.get("managedFields")
    if not isinstance(entries, list):
        return ()
    owners = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        node: Any = entry.get("fieldsV1")
        for part in path:
            node = node.get(f"f:{part}") if isinstance(node, Mapping) else None
        manager = entry.get("manager")
        if node is not None and isinstance(manager, str):
            owners.append(manager)
    return tuple(owners)


def slim(
    obj: KubeObject,
    *,
    owners_of_field: tuple[str, ...] | None = None,
    metadata_keys: Collection[str] | None = None,
    data_keys: Collection[str] | None = None,
) -> KubeObject:
    """What an informer keeps of ``obj``, as client-go's informers drop with a transform.

    Never kept: ``metadata.managedFields`` (server-side apply's bookkeeping, 2.5 KiB of a
    typical Secret) and the :data:`LAST_APPLIED` annotation (the object a second time, a
    Secret's credentials included). Measured by ``bench/secret_discovery.py``, they were
    the exporter's memory per cluster above the same clusters from files (1.16x at 1,000).
    The rest is kept, unless the caller narrows it:

    - ``owners_of_field``: a field path (``("spec", "suspend")``) whose owners are kept,
      as one ``managedFields`` entry per owner naming that field alone (the CD integration
      tells an owner's revert from a person's resume by them: ``reactor.cd.objects``);
    - ``metadata_keys``: only these keys of ``metadata``;
    - ``data_keys``: of the object only ``apiVersion``, ``kind``, ``metadata`` and these
      keys of ``data`` (string values), so that a Secret's credentials are dropped as they
      arrive (``reactor.cd.clustersecrets``).

    ``obj`` is never changed in place (it may be the event's object); one with nothing to
    drop or add is returned as it is.
    """
    source = obj.get("metadata")
    source = source if isinstance(source, Mapping) else None
    owners = owners_of(source, owners_of_field) if source and owners_of_field else ()
    if data_keys is None and metadata_keys is None:
        if source is None:
            return obj
        annotations = source.get("annotations")
        if (
            not owners
            and "managedFields" not in source
            and not (isinstance(annotations, Mapping) and LAST_APPLIED in annotations)
        ):
            return obj
    meta = {
        k: v
        for k, v in (source or {}).items()
        if k != "managedFields" and (metadata_keys is None or k in metadata_keys)
    }
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    if owners:
        field: dict[str, Any] = {}
        for part in reversed(owners_of_field or ()):
            field = {f"f:{part}": field}
        meta["managedFields"] = [{"manager": owner, "fieldsV1": field} for owner in owners]
    if data_keys is None:
        return {**obj, "metadata": meta}
    out: KubeObject = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = meta
    data = obj.get("data")
    data = data if isinstance(data, Mapping) else {}
    kept = {k: data[k] for k in data_keys if isinstance(data.get(k), str)}
    if kept:
        out["data"] = kept
    return out


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
        for uid, obj in paced(objects.items()):
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            known = self._reads.get(uid)
            if known is not None and known[0] == version:
                reads[uid] = known
            else:
                reads[uid] = (version, read(obj, None if known is None else known[1]))
        self._reads = reads  # an object gone is dropped here
        return [made for _, made in reads.values()]
