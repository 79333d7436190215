"""Events: ``events.k8s.io/v1`` written, and the ``core/v1`` view ``kubectl`` reads.

kube-apiserver keeps one Event per object and serves it in both groups, converting the
fields (``regarding`` is ``involvedObject``, ``note`` is ``message``,
``reportingController`` is ``reportingComponent``, ``deprecatedCount`` is ``count`` ...).
``kubectl describe`` (its ``searchEvents``) and ``kubectl events --for KIND/NAME`` read the
core group, with field selectors on ``involvedObject.*``. The stand-in stores the two
views as two resources and writes the core view whenever an ``events.k8s.io`` Event is
created (:func:`core_view`): enough for the reactor, which only creates Events, and for
``kubectl`` to show them. An Event written through the core group is not mirrored the
other way, and updates and deletes of one view leave the other as it was.

Validation follows ``k8s.io/kubernetes/pkg/apis/core/validation/events.go`` for a new
``events.k8s.io/v1`` Event: ``eventTime``, ``reportingController``, ``reportingInstance``,
``action`` and ``reason`` required, ``type`` Normal or Warning, a note of at most 1 kB,
and the Event in the namespace of the object it regards.

Pure: dicts in, dicts out.
"""

from __future__ import annotations

from typing import Any

from fleetwatch.standin.management.status import FieldCause
from fleetwatch.standin.management.validation import _required, _typed, validate_metadata

#: Field selectors each view takes beyond name and namespace (``GetAttrs``, and for
#: ``events.k8s.io`` its field label conversions).
CORE_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)
EVENTS_FIELDS = frozenset(
    {
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    }
)
_NOTE_MAX = 1024
_SHORT_MAX = 128


def validate_event(obj: dict[str, Any]) -> list[FieldCause]:
    """A new ``events.k8s.io/v1`` Event (module docstring)."""
    causes = validate_metadata(obj)
    for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        _required(obj, field, causes)
        if _typed(obj, field, "string", causes) == "":
            causes.append(FieldCause(field, "Required value", "FieldValueRequired"))
    for field in ("reportingInstance", "action", "reason"):
        value = obj.get(field)
        if isinstance(value, str) and len(value) > _SHORT_MAX:
            causes.append(FieldCause(field, f"Too long: may not be more than {_SHORT_MAX} bytes"))
    kind = obj.get("type")
    if kind not in ("Normal", "Warning"):
        causes.append(
            FieldCause(
                "type", f'Unsupported value: "{kind}": supported values: "Normal", "Warning"'
            )
        )
    note = _typed(obj, "note", "string", causes)
    if isinstance(note, str) and len(note.encode()) > _NOTE_MAX:
        causes.append(FieldCause("note", f"Too long: may not be more than {_NOTE_MAX} bytes"))
    regarding = _typed(obj, "regarding", "object", causes)
    namespace = (obj.get("metadata") or {}).get("namespace")
    if isinstance(regarding, dict):
        theirs = regarding.get("namespace")
        if theirs and namespace and theirs != namespace:
            causes.append(
                FieldCause("regarding.namespace", "Invalid value: does not match event.namespace")
            )
    return causes


def validate_core_event(obj: dict[str, Any]) -> list[FieldCause]:
    """A ``core/v1`` Event: its metadata and the types of the fields kubectl reads."""
    causes = validate_metadata(obj)
    _typed(obj, "involvedObject", "object", causes)
    for field in ("reason", "message", "type"):
        _typed(obj, field, "string", causes)
    return causes


def core_view(event: dict[str, Any]) -> dict[str, Any]:
    """The ``core/v1`` Event that says what an ``events.k8s.io/v1`` one says."""
    meta = event.get("metadata") or {}
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta
        },
        "involvedObject": dict(event.get("regarding") or {}),
        "reason": event.get("reason", ""),
        "message": event.get("note", ""),
        "type": event.get("type", ""),
        "eventTime": event.get("eventTime"),
        "action": event.get("action", ""),
        "reportingComponent": event.get("reportingController", ""),
        "reportingInstance": event.get("reportingInstance", ""),
        "source": dict(event.get("deprecatedSource") or {}),
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount", 0),
    }
    if event.get("related"):
        out["related"] = dict(event["related"])
    if event.get("series"):
        out["series"] = dict(event["series"])
    return out
