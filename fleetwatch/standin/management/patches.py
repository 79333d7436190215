"""The patch formats of ``PATCH``, applied to plain JSON documents.

- JSON merge patch (RFC 7386, ``application/merge-patch+json``): objects merge, ``null``
  deletes, anything else (lists included) replaces.
- JSON patch (RFC 6902, ``application/json-patch+json``): ``add``, ``remove``, ``replace``,
  ``move``, ``copy``, ``test``; a failing operation fails the whole patch, as in the
  ``evanphx/json-patch`` library kube-apiserver uses, whose messages these follow.
- Strategic merge patch: for Secrets, Namespaces and Leases none of the fields carries a
  patch strategy that differs from a merge patch's except ``finalizers`` and
  ``ownerReferences`` (merged by key there, replaced here); it is served as a merge patch.
  Custom resources refuse it with 415, as the real server does (see ``server.py``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from fleetwatch.standin.management.status import ApiError, bad_request


class PatchFailed(Exception):
    """A well-formed patch that does not apply (a ``test`` that fails, a missing path)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` applied to ``target`` (neither is modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f'JSON pointer must be empty or start with a "/": {path!r}')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], op: str, path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchFailed(f'{op} operation does not apply: doc is missing path: "{path}"')
    return node


def _get(doc: Any, path: str, op: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, last = _parent(doc, parts, op, path), parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchFailed(f'{op} operation does not apply: doc is missing path: "{path}"')


def _remove(doc: Any, path: str, op: str = "remove") -> Any:
    parts = _pointer(path)
    if not parts:
        raise PatchFailed(f"{op} operation does not apply: cannot remove the whole document")
    parent, last = _parent(doc, parts, op, path), parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchFailed(
        f'{op} operation does not apply: doc is missing path: "{path}": missing value'
    )


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    op = "replace" if replace else "add"
    parent, last = _parent(doc, parts, op, path), parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchFailed(f'replace operation does not apply: doc is missing key: "{path}"')
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise PatchFailed(f'{op} operation does not apply: doc is missing path: "{path}"')
    else:
        raise PatchFailed(f'{op} operation does not apply: doc is missing path: "{path}"')
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: ``operations`` applied in order to a copy of ``target``.

    Raises :class:`ApiError` 400 for a malformed patch, :class:`PatchFailed` when an
    operation does not apply.
    """
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or not isinstance(operation.get("op"), str):
            raise bad_request("json patch operation must be an object with an op")
        op, path = operation["op"], operation.get("path")
        if not isinstance(path, str):
            raise bad_request(f"{op} operation is missing a path")
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchFailed(f"{op} operation does not apply: missing value")
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(operation["value"]))
        elif op == "replace":
            doc = _add(doc, path, copy.deepcopy(operation["value"]), replace=True)
        elif op == "remove":
            _remove(doc, path)
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise bad_request(f"{op} operation is missing from")
            value = (
                _remove(doc, source, op) if op == "move" else copy.deepcopy(_get(doc, source, op))
            )
            doc = _add(doc, path, value)
        elif op == "test":
            if _get(doc, path, op) != operation["value"]:
                raise PatchFailed(f"testing value {path} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {op}")
    return doc


def parse_json(body: bytes, what: str = "request body") -> Any:
    """A JSON body, or 400 as the server's decoder answers."""
    try:
        return json.loads(body)
    except ValueError as exc:
        raise bad_request(f"error decoding {what}: {exc}") from exc


__all__ = ["ApiError", "PatchFailed", "json_patch", "merge_patch", "parse_json"]
