"""Server-side printing: ``Table`` answers for kubectl's human-readable ``get``.

``kubectl get`` asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`` and
prints the columns the server chooses: the built-in printers' for core kinds (a Secret's
``NAME TYPE DATA AGE``), a CRD's ``additionalPrinterColumns`` for custom resources
(Flux's ``READY``/``STATUS``, Argo CD's ``SYNC STATUS``/``HEALTH STATUS``). Each row
carries the object's metadata (``PartialObjectMetadata``), which kubectl reads for
``-A``'s namespace column and ``--show-labels``. In a watch, only the first event's table
has the column definitions, as kube-apiserver sends them.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetwatch.standin.management.kinds import Kind

Cell = Callable[[dict[str, Any]], Any]
TABLE_CONTENT_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def wants_table(accept: str) -> bool:
    """True when the client prefers a ``meta.k8s.io`` Table (kubectl's default ``get``)."""
    first = accept.split(",")[0].replace(" ", "")
    return "as=Table" in first and "g=meta.k8s.io" in first


def human_duration(seconds: float) -> str:
    """An age as kubectl shows it (``k8s.io/apimachinery/pkg/util/duration.HumanDuration``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(obj: dict[str, Any]) -> str:
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return human_duration((datetime.datetime.now(datetime.UTC) - created).total_seconds())


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _condition(kind: str, field: str) -> Cell:
    """``.status.conditions[?(@.type=="<kind>")].<field>`` (empty when absent)."""

    def cell(obj: dict[str, Any]) -> Any:
        for condition in _dig(obj, "status", "conditions") or []:
            if isinstance(condition, dict) and condition.get("type") == kind:
                return condition.get(field, "")
        return ""

    return cell


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    cell: Cell
    priority: int = 0
    description: str = ""


def _name(obj: dict[str, Any]) -> Any:
    return obj["metadata"]["name"]


_NAME = Column("Name", "string", _name, description="Name must be unique within a namespace.")
_AGE = Column(
    "Age", "string", _age, description="CreationTimestamp is the time the object was created."
)
_CRD_AGE = Column("Age", "date", _age)
_FLUX = (
    _CRD_AGE,
    Column("Ready", "string", _condition("Ready", "status")),
    Column("Status", "string", _condition("Ready", "message")),
)


def _event_columns(about: str, text: str) -> tuple[Column, ...]:
    """The core printer's Event columns, read from either view (``events.py``)."""

    def obj(o: dict[str, Any]) -> str:
        return f"{_dig(o, about, 'kind') or ''}/{_dig(o, about, 'name') or ''}".lower()

    return (
        Column("Last Seen", "string", _age),
        Column("Type", "string", lambda o: o.get("type", "")),
        Column("Reason", "string", lambda o: o.get("reason", "")),
        Column("Object", "string", obj),
        Column("Message", "string", lambda o: o.get(text, "")),
    )


#: The columns of each kind: core printers (``pkg/printers/internalversion``), CRDs' own.
COLUMNS: dict[str, tuple[Column, ...]] = {
    "secrets": (
        _NAME,
        Column("Type", "string", lambda o: o.get("type", "")),
        Column("Data", "integer", lambda o: len(o.get("data") or {})),
        _AGE,
    ),
    "namespaces": (_NAME, Column("Status", "string", lambda o: _dig(o, "status", "phase")), _AGE),
    "leases.coordination.k8s.io": (
        _NAME,
        Column("Holder", "string", lambda o: _dig(o, "spec", "holderIdentity") or ""),
        _AGE,
    ),
    "events": _event_columns("involvedObject", "message"),
    "events.events.k8s.io": _event_columns("regarding", "note"),
    "kustomizations.kustomize.toolkit.fluxcd.io": (_NAME, *_FLUX),
    "helmreleases.helm.toolkit.fluxcd.io": (_NAME, *_FLUX),
    "applications.argoproj.io": (
        _NAME,
        Column("Sync Status", "string", lambda o: _dig(o, "status", "sync", "status") or ""),
        Column("Health Status", "string", lambda o: _dig(o, "status", "health", "status") or ""),
        Column("Revision", "string", lambda o: _dig(o, "status", "sync", "revision") or "", 10),
        Column("Project", "string", lambda o: _dig(o, "spec", "project") or "", 10),
        _CRD_AGE,
    ),
}


def _row(obj: dict[str, Any], columns: tuple[Column, ...]) -> dict[str, Any]:
    metadata = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {
        "cells": [column.cell(obj) for column in columns],
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
        },
    }


def table(
    kind: Kind,
    items: list[dict[str, Any]],
    metadata: dict[str, Any] | None = None,
    headers: bool = True,
) -> dict[str, Any]:
    """The ``Table`` of ``items`` with the list's ``metadata`` (resourceVersion, continue);
    without ``headers`` (a watch's later events) the column definitions are null."""
    columns = COLUMNS[kind.key]
    definitions = (
        [
            {
                "name": c.name,
                "type": c.type,
                "format": "name" if c is _NAME else "",
                "description": c.description,
                "priority": c.priority,
            }
            for c in columns
        ]
        if headers
        else None
    )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata or {},
        "columnDefinitions": definitions,
        "rows": [_row(obj, columns) for obj in items],
    }
