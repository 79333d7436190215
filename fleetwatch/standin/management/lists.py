"""Lists with kube-apiserver's resourceVersion semantics, selectors and paging.

``resourceVersion`` unset: the latest state; ``"0"``: any state (the watch cache's,
``limit`` ignored); ``N`` with ``NotOlderThan`` (or no match): the latest, once the server
has reached ``N`` (3 s, then 504); ``N`` with ``Exact``: the state at ``N``, rebuilt from
the history, 410 before it. ``limit``/``continue`` page at the first page's revision; a
continue token from before a compaction is 410.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from fleetwatch.standin.management.events import CORE_FIELDS, EVENTS_FIELDS
from fleetwatch.standin.management.kinds import CORE_EVENTS, EVENTS, NAMESPACES, SECRETS, Kind
from fleetwatch.standin.management.requests import Target
from fleetwatch.standin.management.selectors import selectors
from fleetwatch.standin.management.status import (
    bad_request,
    expired,
    too_large_resource_version,
)
from fleetwatch.standin.management.store import ObjectStore
from fleetwatch.standin.management.watch import FRESHNESS_WAIT

_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter."
)


def extra_fields(kind: Kind) -> frozenset[str]:
    """Fields a kind's field selectors take beyond name and namespace (its storage's
    ``GetAttrs``)."""
    if kind is SECRETS:
        return frozenset({"type"})
    if kind is NAMESPACES:
        return frozenset({"status.phase"})
    if kind is EVENTS:
        return EVENTS_FIELDS
    if kind is CORE_EVENTS:
        return CORE_FIELDS
    return frozenset()


def _encode_continue(revision: int, after: str) -> str:
    token = {"v": "meta.k8s.io/v1", "rv": revision, "start": after + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode()


def _decode_continue(value: str) -> tuple[int, str]:
    try:
        token = json.loads(base64.urlsafe_b64decode(value.encode()))
        return int(token["rv"]), str(token["start"]).rstrip("\x00")
    except (ValueError, KeyError, TypeError):
        raise bad_request("continue key is not valid: invalid continue token") from None


def _name_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


async def list_objects(store: ObjectStore, target: Target, query: dict[str, str]) -> dict[str, Any]:
    """A list with the real resourceVersion semantics (unset, "0", NotOlderThan, Exact)."""
    kind = target.kind
    predicate = selectors(query, extra_fields(kind))
    rv, match, token = (
        query.get("resourceVersion", ""),
        query.get("resourceVersionMatch", ""),
        query.get("continue", ""),
    )
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise bad_request(f"invalid limit {query['limit']!r}") from None
    if match and not rv:
        raise bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if match not in ("", "NotOlderThan", "Exact"):
        raise bad_request(f'resourceVersionMatch: Unsupported value: "{match}"')
    if token and rv:
        raise bad_request("specifying resource version is not allowed when using continue")
    if match == "Exact" and rv == "0":
        raise bad_request('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    at, after = 0, ""
    if token:
        at, after = _decode_continue(token)
        if at < store.compacted:
            raise expired(_CONTINUE_TOO_OLD)
    elif rv and rv != "0":
        try:
            wanted = int(rv)
        except ValueError:
            raise bad_request(f'invalid resource version "{rv}"') from None
        if wanted > store.revision and not await store.wait_for(wanted, FRESHNESS_WAIT):
            raise too_large_resource_version(wanted, store.revision)
        if match == "Exact":
            if wanted < store.compacted:
                raise expired("The resourceVersion for the provided list is too old.")
            at = wanted
    # "0" is served from the watch cache, which ignores limit (the documented behaviour).
    page = limit if limit > 0 and rv != "0" else 0
    selected = bool(query.get("labelSelector") or query.get("fieldSelector"))
    items, rest = store.page(
        kind, target.namespace, predicate, at, after, page, count_more=not selected
    )
    revision = at or store.revision
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if rest:
        meta["continue"] = _encode_continue(revision, _name_key(items[-1]))
        if not selected:
            meta["remainingItemCount"] = rest
    if not kind.custom:
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
    return {
        "kind": f"{kind.kind}List",
        "apiVersion": kind.api_version,
        "metadata": meta,
        "items": items,
    }
