"""What the server does to an object on its way in: defaults, server-owned metadata, checks.

Pure functions over plain dicts, called by the store for every write: identity checks
against the request (kind, name, namespace), ``stringData`` folded into ``data``, the
server's metadata (``uid``, ``creationTimestamp``, ``generation``) kept or set, immutable
fields held, the kind's validation run. ``resourceVersion`` and ``managedFields`` are the
store's, set when it commits.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime
import secrets
import uuid
from typing import Any

from fleetwatch.standin.management.kinds import NAMESPACES, SECRETS, Kind
from fleetwatch.standin.management.status import FieldCause, bad_request, invalid


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_identity(kind: Kind, namespace: str, name: str | None, body: Any) -> dict[str, Any]:
    """``obj`` is an object of ``kind`` for this URL; apiVersion/kind filled in when absent."""
    if not isinstance(body, dict):
        raise bad_request(f"the body of the request must be a {kind.kind} object")
    obj: dict[str, Any] = copy.deepcopy(body)
    api_version, obj_kind = obj.get("apiVersion") or kind.api_version, obj.get("kind") or kind.kind
    if api_version != kind.api_version or obj_kind != kind.kind:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({kind.api_version})"
            if api_version != kind.api_version
            else f"the kind in the data ({obj_kind}) does not match the expected kind ({kind.kind})"
        )
    obj["apiVersion"], obj["kind"] = api_version, obj_kind
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if kind.namespaced:
        given = meta.get("namespace")
        if given and given != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if name is not None:
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        meta["name"] = name
    elif not meta.get("name") and meta.get("generateName"):
        meta["name"] = f"{meta['generateName']}{_suffix()}"
    return obj


def _suffix() -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # apiserver's names.SimpleNameGenerator
    return "".join(secrets.choice(alphabet) for _ in range(5))


def _fold_secret(obj: dict[str, Any]) -> None:
    """``stringData`` merged into ``data`` (it wins), ``type`` defaulted, base64 checked."""
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise bad_request(
            'Secret in version "v1" cannot be handled as a Secret: data must be a map'
        )
    for key, value in data.items():
        try:
            if not isinstance(value, str):
                raise ValueError
            base64.b64decode(value, validate=True)
        except (ValueError, binascii.Error):
            raise bad_request(
                f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data '
                f"in data[{key}]"
            ) from None
    string_data = obj.pop("stringData", None) or {}
    if not isinstance(string_data, dict) or not all(
        isinstance(v, str) for v in string_data.values()
    ):
        raise bad_request(
            'Secret in version "v1" cannot be handled as a Secret: stringData must map to strings'
        )
    for key, value in string_data.items():
        data[key] = base64.b64encode(value.encode()).decode()
    if data:
        obj["data"] = data
    else:
        obj.pop("data", None)
    obj["type"] = obj.get("type") or "Opaque"


def _spec_part(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """What bumps ``generation``: all but metadata (and status, when a subresource)."""
    skip = {"metadata", "status"} if kind.status_subresource else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}


def prepare(
    kind: Kind, obj: dict[str, Any], old: dict[str, Any] | None, *, subresource: str = ""
) -> dict[str, Any]:
    """The object to store for a create (``old`` None) or an update; raises ``ApiError``."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    if old is not None and subresource == "status":
        status = obj.get("status")
        obj = copy.deepcopy(old)
        if status is None:
            obj.pop("status", None)
        else:
            obj["status"] = status
        meta = obj["metadata"]
    elif kind.status_subresource:
        # Writes to the object itself keep its status (on create: none), as the CRD's
        # strategy resets it when ``status`` is a subresource.
        if old is not None and "status" in old:
            obj["status"] = copy.deepcopy(old["status"])
        else:
            obj.pop("status", None)
    if kind is SECRETS:
        _fold_secret(obj)
        if old is not None and old.get("type") != obj["type"]:
            raise invalid(
                kind.resource,
                meta["name"],
                [FieldCause("type", f'Invalid value: "{obj["type"]}": field is immutable')],
            )
    if kind is NAMESPACES:
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
    for server_owned in ("resourceVersion", "managedFields", "selfLink"):
        meta.pop(server_owned, None)
    if old is None:
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        meta.pop("deletionTimestamp", None)
        if kind.custom:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
    else:
        old_meta = old["metadata"]
        for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if kept in old_meta:
                meta[kept] = old_meta[kept]
            else:
                meta.pop(kept, None)
        if kind.custom:
            bump = _spec_part(kind, obj) != _spec_part(kind, old)
            meta["generation"] = old_meta.get("generation", 1) + (1 if bump else 0)
        else:
            meta.pop("generation", None)
    for key in ("labels", "annotations"):
        if meta.get(key) == {}:
            del meta[key]
    causes = kind.validate(obj)
    if causes:
        raise invalid(kind.resource, str(meta.get("name", "")), causes)
    return obj


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal but for what every write changes: a write of this is a no-op (no new revision)."""

    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {
            k: v
            for k, v in obj["metadata"].items()
            if k not in ("resourceVersion", "managedFields")
        }
        return {**obj, "metadata": meta}

    return strip(a) == strip(b)


#: ``ObjectMeta``'s fields.
_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def prune_unknown(kind: Kind, obj: dict[str, Any]) -> list[str]:
    """Drop the top-level and metadata fields the kind does not have; their paths.

    The real server prunes unknown fields everywhere (a CRD's structural schema, a core
    type's decoder); here only at those two levels, which is where typos of the fields
    fleetwatch uses would land (``spec`` itself is not walked).
    """
    known = {"apiVersion", "kind", "metadata", *kind.fields}
    unknown = [key for key in obj if key not in known]
    for key in unknown:
        del obj[key]
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        extra = [key for key in meta if key not in _META_FIELDS]
        for key in extra:
            del meta[key]
        unknown += [f"metadata.{key}" for key in extra]
    return unknown


class FieldCheck:
    """``fieldValidation`` of one write: unknown fields pruned, then refused (``Strict``,
    kubectl's choice), warned about (``Warn``, the default) or not (``Ignore``)."""

    def __init__(self, kind: Kind, mode: str | None) -> None:
        if mode not in (None, "Ignore", "Warn", "Strict"):
            raise bad_request(
                f'fieldValidation: Unsupported value: "{mode}": supported values: '
                '"Ignore", "Warn", "Strict"'
            )
        self.kind, self.mode = kind, mode or "Warn"
        self.warnings: list[str] = []

    def __call__(self, obj: Any) -> Any:
        if not isinstance(obj, dict):
            return obj
        unknown = prune_unknown(self.kind, obj)
        found = [f'unknown field "{path}"' for path in unknown]
        if found and self.mode == "Strict":
            kind = self.kind.kind
            raise bad_request(
                f'{kind} in version "{self.kind.version}" cannot be handled as a {kind}: '
                f"strict decoding error: {', '.join(found)}"
            )
        if self.mode == "Warn":
            self.warnings += found
        return obj
