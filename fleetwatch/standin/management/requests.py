"""A request's target, parsed once from its method, path and query (as ``RequestInfo``).

``/api/v1/namespaces/ns/secrets/a`` and ``/apis/<group>/<version>/namespaces/ns/<plural>``
name a namespaced resource, ``/api/v1/namespaces/a`` a namespace, and a trailing segment a
subresource; the verb follows from the method and, for a GET without a name, from
``watch``. Paths that are not resources (discovery, health) give None.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwatch.standin.management.kinds import BY_PATH, Kind
from fleetwatch.standin.management.status import PATH_NOT_FOUND

_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class Target:
    kind: Kind
    verb: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""


def truthy(value: str | None) -> bool:
    """Go's ``strconv.ParseBool`` true values, as the server reads ``watch`` and ``force``."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def parse_target(method: str, path: str, query: dict[str, str]) -> Target | None:
    """The resource a request is for; None for other paths; 404 for an unknown resource."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    kind = BY_PATH.get((group, version, rest[0]))
    if kind is None or len(rest) > 3 or (namespace and not kind.namespaced):
        raise PATH_NOT_FOUND
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if subresource and (subresource != "status" or not kind.status_subresource):
        raise PATH_NOT_FOUND
    if method in ("GET", "HEAD"):
        verb = "get" if name else ("watch" if truthy(query.get("watch")) else "list")
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
        if verb == "delete" and not name:
            verb = "deletecollection"
    return Target(kind, verb, namespace, name, subresource)
