"""What the real API server rejects in the objects we serve, for the fields fleetwatch uses.

Pure functions from an object (a plain dict) to a list of :class:`FieldCause`; an empty list
is valid. The rules are those of ``k8s.io/apimachinery/pkg/api/validation`` (names, labels,
annotations) and of the CRDs' OpenAPI schemas (required fields, field types), written out for
the fields fleetwatch reads or patches — not a general schema validator. Versions held to:
Flux kustomize-controller v1 and helm-controller v2 CRDs, Argo CD v2.x/v3.x ``Application``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fleetwatch.standin.management.status import FieldCause

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
#: kube-apiserver's limits: annotations 256 KiB in all, a Secret's data 1 MiB.
_ANNOTATIONS_MAX = 256 * 1024
SECRET_MAX = 1024 * 1024

Validator = Callable[[dict[str, Any]], list[FieldCause]]


def _name_ok(name: str, subdomain: bool) -> str | None:
    limit, pattern = (253, _DNS1123_SUBDOMAIN) if subdomain else (63, _DNS1123_LABEL)
    if len(name) > limit:
        return f"must be no more than {limit} characters"
    if not pattern.fullmatch(name):
        kind = "subdomain" if subdomain else "label"
        return (
            f"a lowercase RFC 1123 {kind} must consist of lower case alphanumeric characters, "
            f"'-'{' or ' + repr('.') if subdomain else ''}, and must start and end with an "
            "alphanumeric character"
        )
    return None


def _qualified_key(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a DNS subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return None


def validate_metadata(obj: dict[str, Any], *, subdomain: bool = True) -> list[FieldCause]:
    """Name, labels and annotations (``ValidateObjectMeta``)."""
    causes: list[FieldCause] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [FieldCause("metadata", "Required value", "FieldValueRequired")]
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(
            FieldCause(
                "metadata.name",
                "Required value: name or generateName is required",
                "FieldValueRequired",
            )
        )
    elif (why := _name_ok(name, subdomain)) is not None:
        causes.append(FieldCause("metadata.name", f'Invalid value: "{name}": {why}'))
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        causes.append(FieldCause("metadata.labels", "Invalid value: must be a map"))
    else:
        for key, value in labels.items():
            if (why := _qualified_key(key)) is not None:
                causes.append(FieldCause("metadata.labels", f'Invalid value: "{key}": {why}'))
            if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
                causes.append(
                    FieldCause(
                        "metadata.labels",
                        f'Invalid value: "{value}": a valid label must be an empty string or '
                        "consist of alphanumeric characters, '-', '_' or '.', and must start "
                        "and end with an alphanumeric character",
                    )
                )
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        causes.append(FieldCause("metadata.annotations", "Invalid value: must be a map"))
    else:
        size = 0
        for key, value in annotations.items():
            if (why := _qualified_key(key)) is not None:
                causes.append(FieldCause("metadata.annotations", f'Invalid value: "{key}": {why}'))
            if not isinstance(value, str):
                causes.append(FieldCause(f"metadata.annotations.{key}", "must be a string"))
            else:
                size += len(key) + len(value)
        if size > _ANNOTATIONS_MAX:
            causes.append(
                FieldCause(
                    "metadata.annotations",
                    f"Too long: must have at most {_ANNOTATIONS_MAX} bytes",
                    "FieldValueTooLong",
                )
            )
    return causes


def validate_namespace(obj: dict[str, Any]) -> list[FieldCause]:
    return validate_metadata(obj, subdomain=False)


def validate_secret(obj: dict[str, Any]) -> list[FieldCause]:
    """Keys of ``data`` (``[-._a-zA-Z0-9]+``), 1 MiB in all; values are already decoded."""
    causes = validate_metadata(obj)
    data = obj.get("data") or {}
    total = 0
    for key, value in data.items():
        if not _SECRET_KEY.fullmatch(key):
            causes.append(
                FieldCause(
                    f"data[{key}]",
                    f'Invalid value: "{key}": a valid config key must consist of alphanumeric '
                    "characters, '-', '_' or '.'",
                )
            )
        total += len(value)
    if total > SECRET_MAX:
        causes.append(
            FieldCause(
                "data", f"Too long: must have at most {SECRET_MAX} bytes", "FieldValueTooLong"
            )
        )
    return causes


# --- the CRDs' schemas, for the fields we use --------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "object": (dict,),
    "array": (list,),
}


def _typed(obj: dict[str, Any], path: str, type_name: str, causes: list[FieldCause]) -> Any:
    """The value at dotted ``path`` if present; a cause if it has the wrong JSON type."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if value is None:
        return None
    ok = isinstance(value, _TYPES[type_name])
    if type_name == "integer" and isinstance(value, bool):
        ok = False
    if not ok:
        got = _json_type(value)
        causes.append(
            FieldCause(
                path,
                f'Invalid value: "{got}": {path} in body must be of type {type_name}: "{got}"',
                "FieldValueTypeInvalid",
            )
        )
        return None
    return value


def _json_type(value: Any) -> str:
    for name, types in _TYPES.items():
        if isinstance(value, types) and not (name == "integer" and isinstance(value, bool)):
            return name
    return "number" if isinstance(value, float) else "null"


def _required(obj: dict[str, Any], path: str, causes: list[FieldCause]) -> None:
    parent_path, _, key = path.rpartition(".")
    parent: Any = obj
    for part in parent_path.split(".") if parent_path else []:
        parent = parent.get(part) if isinstance(parent, dict) else None
    if isinstance(parent, dict) and key not in parent:
        causes.append(FieldCause(path, "Required value", "FieldValueRequired"))


def _flux_common(obj: dict[str, Any], causes: list[FieldCause]) -> None:
    _required(obj, "spec", causes)
    _typed(obj, "spec", "object", causes)
    _typed(obj, "spec.interval", "string", causes)
    _typed(obj, "spec.suspend", "boolean", causes)
    has_config = _typed(obj, "spec.kubeConfig", "object", causes) is not None
    if has_config and _typed(obj, "spec.kubeConfig.secretRef", "object", causes) is not None:
        _required(obj, "spec.kubeConfig.secretRef.name", causes)
        _typed(obj, "spec.kubeConfig.secretRef.name", "string", causes)
        _typed(obj, "spec.kubeConfig.secretRef.key", "string", causes)


def validate_kustomization(obj: dict[str, Any]) -> list[FieldCause]:
    """``kustomize.toolkit.fluxcd.io/v1``: spec requires interval, prune and sourceRef."""
    causes = validate_metadata(obj)
    _flux_common(obj, causes)
    for field in ("interval", "prune", "sourceRef"):
        _required(obj, f"spec.{field}", causes)
    _typed(obj, "spec.prune", "boolean", causes)
    if _typed(obj, "spec.sourceRef", "object", causes) is not None:
        _required(obj, "spec.sourceRef.kind", causes)
        _required(obj, "spec.sourceRef.name", causes)
    return causes


def validate_helmrelease(obj: dict[str, Any]) -> list[FieldCause]:
    """``helm.toolkit.fluxcd.io/v2``: spec requires interval, and (a CEL rule) chart or chartRef."""
    causes = validate_metadata(obj)
    _flux_common(obj, causes)
    _required(obj, "spec.interval", causes)
    spec = obj.get("spec")
    if isinstance(spec, dict) and ("chart" in spec) == ("chartRef" in spec):
        causes.append(
            FieldCause("spec", 'Invalid value: "object": either chart or chartRef must be set')
        )
    return causes


def validate_application(obj: dict[str, Any]) -> list[FieldCause]:
    """``argoproj.io/v1alpha1``: spec requires destination and project."""
    causes = validate_metadata(obj)
    _required(obj, "spec", causes)
    _typed(obj, "spec", "object", causes)
    _required(obj, "spec.destination", causes)
    _required(obj, "spec.project", causes)
    _typed(obj, "spec.project", "string", causes)
    if _typed(obj, "spec.destination", "object", causes) is not None:
        for field in ("name", "server", "namespace"):
            _typed(obj, f"spec.destination.{field}", "string", causes)
    return causes


def validate_lease(obj: dict[str, Any]) -> list[FieldCause]:
    """``coordination.k8s.io/v1``: the fields leader election writes, by type."""
    causes = validate_metadata(obj)
    _typed(obj, "spec.holderIdentity", "string", causes)
    _typed(obj, "spec.leaseDurationSeconds", "integer", causes)
    _typed(obj, "spec.leaseTransitions", "integer", causes)
    _typed(obj, "spec.acquireTime", "string", causes)
    _typed(obj, "spec.renewTime", "string", causes)
    return causes
