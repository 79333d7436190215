"""Field ownership (``metadata.managedFields``) and server-side apply, simplified.

Real server-side apply (``sigs.k8s.io/structured-merge-diff``) tracks every field each
manager set, merges lists by their keys, and refuses an apply that would change a field
another manager owns (409, unless ``force``). Here:

- A field is a path of map keys to a leaf; lists are atomic (owned and replaced whole),
  as for lists without ``x-kubernetes-list-type: map`` in a schema. No ``.`` entries and no
  ``k:``/``v:`` list items in ``fieldsV1``.
- Every write records its manager (``fieldManager``, else the User-Agent's product name,
  as the real server derives it): an update takes over the fields it changed; an apply
  owns exactly the fields of its configuration, and fields it owned before and no longer
  sets are removed unless another manager also owns them.
- Conflicts are real: an apply that changes a field another manager owns (with a value
  that differs) is refused with the real message, or takes the field over with ``force``.
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.standin.management.status import ApiError

Path = tuple[str, ...]

#: Metadata that ownership ignores (set by the server, or identity).
_UNTRACKED_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "deletionTimestamp",
        "selfLink",
        "generateName",
    }
)


def leaf_paths(obj: dict[str, Any]) -> set[Path]:
    """Paths to the leaves of ``obj`` (maps are walked, lists and scalars are leaves)."""
    out: set[Path] = set()

    def walk(node: Any, prefix: Path) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, (*prefix, key))
        else:
            out.add(prefix)

    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(value, dict):
            for meta_key, meta_value in value.items():
                if meta_key not in _UNTRACKED_META:
                    walk(meta_value, ("metadata", meta_key))
        else:
            walk(value, (key,))
    return out


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    node = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _delete(obj: dict[str, Any], path: Path) -> None:
    parents: list[tuple[dict[str, Any], str]] = []
    node: Any = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    parent, key = parents.pop()
    del parent[key]
    # Maps the removal left empty go too (an applied label map that lost its last label).
    while parents and not parent:
        parent, key = parents.pop()
        del parent[key]


def deep_merge(live: Any, applied: Any) -> Any:
    """Maps merged key by key; lists and scalars of ``applied`` replace."""
    if isinstance(live, dict) and isinstance(applied, dict):
        out = dict(live)
        for key, value in applied.items():
            out[key] = deep_merge(live.get(key), value)
        return out
    return copy.deepcopy(applied)


def fields_v1(paths: set[Path]) -> dict[str, Any]:
    """The ``fieldsV1`` trie: ``{"f:spec": {"f:suspend": {}}}``."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return root


@dataclass
class Entry:
    manager: str
    operation: str  # "Apply" or "Update"
    api_version: str
    time: str
    paths: set[Path] = field(default_factory=set)
    subresource: str = ""

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(self.paths),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Ownership:
    """Who owns which fields of one object."""

    entries: list[Entry] = field(default_factory=list)

    def _entry(self, manager: str, operation: str, api_version: str, subresource: str) -> Entry:
        for entry in self.entries:
            if (entry.manager, entry.operation, entry.subresource) == (
                manager,
                operation,
                subresource,
            ):
                entry.time, entry.api_version = _now(), api_version
                return entry
        entry = Entry(manager, operation, api_version, _now(), subresource=subresource)
        self.entries.append(entry)
        return entry

    def record_update(
        self,
        old: dict[str, Any] | None,
        new: dict[str, Any],
        manager: str,
        api_version: str,
        subresource: str = "",
    ) -> None:
        """A create, update or patch by ``manager``: it takes over the fields it changed."""
        new_paths = leaf_paths(new)
        old_paths = leaf_paths(old) if old is not None else set()
        changed = {p for p in new_paths if old is None or value_at(old, p) != value_at(new, p)}
        gone = old_paths - new_paths
        for entry in self.entries:
            entry.paths -= changed | gone
        if changed:
            self._entry(manager, "Update", api_version, subresource).paths |= changed
        self.entries = [e for e in self.entries if e.paths]

    def apply(
        self,
        live: dict[str, Any] | None,
        applied: dict[str, Any],
        manager: str,
        force: bool,
    ) -> dict[str, Any]:
        """The object after ``manager`` applied ``applied`` to ``live`` (None: a create)."""
        paths = leaf_paths(applied)
        base = copy.deepcopy(live) if live is not None else {}
        if live is not None:
            conflicts: list[tuple[str, Path]] = []
            for entry in self.entries:
                if entry.manager == manager and entry.operation == "Apply":
                    continue
                for path in sorted(entry.paths & paths):
                    if value_at(live, path) != value_at(applied, path):
                        conflicts.append((entry.manager, path))
            if conflicts and not force:
                raise _conflict_error(conflicts, applied.get("apiVersion", ""))
            for entry in self.entries:
                if entry.manager != manager or entry.operation != "Apply":
                    entry.paths -= {p for m, p in conflicts if m == entry.manager}
        mine = self._entry(manager, "Apply", str(applied.get("apiVersion", "")), "")
        others = set().union(*(e.paths for e in self.entries if e is not mine))
        for path in mine.paths - paths - others:
            _delete(base, path)
        mine.paths = paths
        self.entries = [e for e in self.entries if e.paths]
        merged: dict[str, Any] = deep_merge(base, applied)
        return merged

    def render(self) -> list[dict[str, Any]]:
        return [entry.render() for entry in self.entries]


def _conflict_error(conflicts: list[tuple[str, Path]], api_version: str) -> ApiError:
    """The apply conflict as ``fieldmanager`` words it (409 ``Conflict``)."""
    lines = [f'conflict with "{m}": .{".".join(p)}' for m, p in conflicts]
    if len(lines) == 1:
        message = f"Apply failed with 1 conflict: {lines[0]}"
    else:
        message = f"Apply failed with {len(lines)} conflicts: " + "\n".join(lines)
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{m}"',
            "field": "." + ".".join(p),
        }
        for m, p in conflicts
    ]
    return ApiError(409, "Conflict", message, {"causes": causes})
