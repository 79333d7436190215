"""The management cluster's HTTP API: discovery, the verbs on every resource, and errors.

One aiohttp application with one route; it parses each request's target once, counts it, plays
any armed fault, authenticates and authorizes it, and turns :class:`ApiError` into the
``Status`` answer. Bodies are JSON (``application/json``, as kube-apiserver answers
without a charset); server-side apply bodies are YAML or JSON.

Lists and gets: core kinds' list items carry no ``apiVersion``/``kind`` (typed lists omit
them), custom resources' do (unstructured lists keep them), as on a real server. Tables
(``Accept: ...;as=Table``, kubectl's human-readable ``get``) come from ``tables.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

from fleetwatch.standin.management import kinds, objects, openapi
from fleetwatch.standin.management.audit import AuditEvent, AuditLog
from fleetwatch.standin.management.auth import Tokens
from fleetwatch.standin.management.events import core_view
from fleetwatch.standin.management.faults import WATCH_FAULTS, Faults
from fleetwatch.standin.management.lists import extra_fields, list_objects
from fleetwatch.standin.management.patches import PatchFailed, json_patch, merge_patch, parse_json
from fleetwatch.standin.management.requests import Target, parse_target, truthy
from fleetwatch.standin.management.selectors import selectors
from fleetwatch.standin.management.status import (
    METHOD_NOT_ALLOWED,
    PATH_NOT_FOUND,
    UNAUTHORIZED,
    ApiError,
    bad_request,
    expired,
    internal,
    too_many_requests,
    unprocessable,
    unsupported_media_type,
)
from fleetwatch.standin.management.store import WATCH_BUFFER, ObjectStore
from fleetwatch.standin.management.tables import TABLE_CONTENT_TYPE, table, wants_table
from fleetwatch.standin.management.watch import serve_broken_watch, serve_watch
from fleetwatch.standin.workload.responses import VERSION

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


@dataclass
class Management:
    """The state one server answers from (``app[MANAGEMENT]``)."""

    store: ObjectStore
    tokens: Tokens = field(default_factory=Tokens)
    faults: Faults = field(default_factory=Faults)
    #: every write answered, with its user and code (``audit.py``)
    audit: AuditLog = field(default_factory=AuditLog)
    #: Seconds between a watch's bookmarks (kube-apiserver: about 60).
    bookmark_seconds: float = 60.0
    #: Events a watch may fall behind before it is terminated (``store.WatchStream``).
    watch_buffer: int = WATCH_BUFFER
    #: ``host:port`` the server reports in ``/api``'s serverAddressByClientCIDRs.
    address: str = ""


MANAGEMENT = web.AppKey("management", Management)
log = logging.getLogger(__name__)


def _written(answer: tuple[dict[str, Any], int], check: objects.FieldCheck) -> web.Response:
    """A write's answer, with a ``Warning`` header per warning (RFC 7234 code 299)."""
    response = _json(*answer)
    for warning in check.warnings:
        response.headers.add("Warning", f"299 - {json.dumps(warning)}")
    return response


def _json(body: Any, status: int = 200) -> web.Response:
    """JSON as Go's encoder writes it (compact), ``application/json`` without a charset."""
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _table(body: dict[str, Any]) -> web.Response:
    response = _json(body)
    response.headers["Content-Type"] = TABLE_CONTENT_TYPE
    return response


def error_response(error: ApiError) -> web.Response:
    response = _json(error.status(), error.code)
    retry = (error.details or {}).get("retryAfterSeconds")
    if retry is not None and error.code in (429, 503, 504):
        response.headers["Retry-After"] = str(retry)
    return response


@dataclass
class _Seen:
    """What the front learnt of a request, for its audit event."""

    target: Target | None = None
    user: str = ""


async def _front(request: web.Request) -> web.StreamResponse:
    """Every request: parsed, counted, faulted, authenticated, authorized, served, and (a
    write) written in the audit log with its answer's code."""
    state = request.app[MANAGEMENT]
    received = time.time()
    seen = _Seen()
    response = await _serve(request, state, seen)
    if seen.target is not None:
        target = seen.target
        agent = request.headers.get("User-Agent", "")[:256]
        where = (target.verb, target.kind.key, target.namespace, target.name)
        state.audit.record(AuditEvent(received, seen.user, agent, *where, response.status))
    return response


async def _serve(request: web.Request, state: Management, seen: _Seen) -> web.StreamResponse:
    try:
        target = seen.target = parse_target(request.method, request.path, dict(request.query))
        verb, resource = (target.verb, target.kind.key) if target else ("get", request.path)
        state.faults.count(verb, resource)
        fault = state.faults.take(verb, resource)
        if fault is not None:
            if fault.kind in WATCH_FAULTS and target is not None:
                return await serve_broken_watch(
                    request, fault.kind, _fault_error(fault.status, fault.reason, fault.message)
                )
            if fault.kind == "hang":
                await state.faults.release.wait()
                raise internal("the request was abandoned (hang fault cleared)")
            if fault.kind == "delay":
                await asyncio.sleep(fault.delay_seconds)
            elif fault.kind == "throttle":
                raise too_many_requests(fault.retry_after)
            else:
                raise _fault_error(fault.status, fault.reason, fault.message)
        grant = state.tokens.grant(request.headers.get("Authorization"))
        if grant is None:
            raise UNAUTHORIZED
        seen.user = grant.user
        if target is not None:
            grant.check(target.kind, target.verb, target.namespace, target.name)
        return await _dispatch(request, state, target)
    except ApiError as error:
        return error_response(error)
    except (ConnectionError, asyncio.CancelledError):
        raise
    except Exception as exc:  # a bug here answers as kube-apiserver's panic filter would
        log.exception("management stand-in: %s %s failed", request.method, request.path)
        return error_response(internal(f"{type(exc).__name__}: {exc}"))


def _fault_error(status: int, reason: str | None, message: str | None) -> ApiError:
    if reason is not None or message is not None:
        return ApiError(
            status, reason or "InternalError", message or f"fault injected: HTTP {status}"
        )
    if status == 410:
        return expired("too old resource version (fault injected by the control API)")
    if status == 500:
        return internal("fault injected by the stand-in's control API")
    if status == 503:
        return ApiError(
            503, "ServiceUnavailable", "the server is currently unable to handle the request", {}
        )
    if status == 504:
        return ApiError(
            504, "Timeout", "the server was unable to return a response in the time allotted", {}
        )
    return ApiError(status, "InternalError", f"fault injected: HTTP {status}", {})


async def _dispatch(
    request: web.Request, state: Management, target: Target | None
) -> web.StreamResponse:
    if target is None:
        return _non_resource(request, state)
    query = dict(request.query)
    store, kind = state.store, target.kind
    if target.verb in ("create", "update", "patch", "delete"):
        dry_run = await _dry_run_value(request, query)
        if dry_run is not None:
            check = objects.FieldCheck(kind, query.get("fieldValidation"))
            return _written(await _dry_run(request, store, target, query, dry_run, check), check)
    as_table = wants_table(request.headers.get("Accept", ""))
    if target.verb == "list":
        listed = await list_objects(store, target, query)
        if as_table:
            return _table(table(kind, listed["items"], listed["metadata"]))
        return _json(listed)
    if target.verb == "watch":
        predicate = selectors(query, extra_fields(kind))
        return await serve_watch(
            request,
            store,
            target,
            predicate,
            state.bookmark_seconds,
            capacity=state.watch_buffer,
            as_table=as_table,
        )
    if target.verb == "get":
        obj = store.get(kind, target.namespace, target.name)
        if as_table and not target.subresource:
            meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            return _table(table(kind, [obj], meta))
        return _json(obj)
    check = objects.FieldCheck(kind, query.get("fieldValidation"))
    return _written(await _write(request, store, target, query, check), check)


async def _write(
    request: web.Request,
    store: ObjectStore,
    target: Target,
    query: dict[str, str],
    check: objects.FieldCheck,
) -> tuple[dict[str, Any], int]:
    """A create, update, patch or delete: the answer's body and status."""
    kind = target.kind
    manager = query.get("fieldManager") or _agent_manager(request)
    body = await request.read()
    if target.verb == "create" and not target.subresource:
        obj = check(_object_body(request, body))
        created = store.create(kind, target.namespace, obj, manager)
        if kind is kinds.EVENTS:  # the core view kubectl describe reads (events.py)
            view = core_view(created)
            if not store.exists(kinds.CORE_EVENTS, target.namespace, view["metadata"]["name"]):
                store.create(kinds.CORE_EVENTS, target.namespace, view, manager)
        return created, 201
    if target.verb == "update":
        obj = check(_object_body(request, body))
        updated = store.update(
            kind, target.namespace, target.name, obj, manager, subresource=target.subresource
        )
        return updated, 200
    if target.verb == "patch":
        return _patch(request.content_type, store, target, query, body, manager, check)
    if target.verb == "delete" and not target.subresource:
        return _delete(store, target, body), 200
    raise METHOD_NOT_ALLOWED


def _object_body(request: web.Request, body: bytes) -> Any:
    """A create's or update's body: JSON, or YAML when sent as ``application/yaml``."""
    if request.content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            return yaml.safe_load(body)
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from exc
    return parse_json(body)


async def _dry_run_value(request: web.Request, query: dict[str, str]) -> str | None:
    """``dryRun`` from the query, or for a delete from its ``DeleteOptions`` body (kubectl
    puts it there)."""
    if "dryRun" in query:
        return query["dryRun"]
    if request.method == "DELETE":
        body = await request.read()  # aiohttp keeps it for the handler's own read
        if body.strip():
            options = parse_json(body, "DeleteOptions")
            given = options.get("dryRun") if isinstance(options, dict) else None
            if isinstance(given, list) and given:
                return ",".join(str(v) for v in given)
    return None


async def _dry_run(
    request: web.Request,
    store: ObjectStore,
    target: Target,
    query: dict[str, str],
    value: str,
    check: objects.FieldCheck,
) -> tuple[dict[str, Any], int]:
    """``dryRun=All``: the write validated and answered as if done, on a scratch copy.

    As kube-apiserver, a dry-run create answers without a resourceVersion, and other
    writes with the object's current one: nothing was stored.
    """
    if value != "All":
        raise bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    body, status = await _write(request, store.scratch(), target, query, check)
    meta = body.get("metadata")
    if body.get("kind") != "Status" and isinstance(meta, dict):
        if store.exists(target.kind, target.namespace, meta.get("name", "")):
            current = store.get(target.kind, target.namespace, meta["name"])
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        else:
            meta.pop("resourceVersion", None)
    return body, status


def _agent_manager(request: web.Request) -> str:
    """The field manager the server derives from the User-Agent (its product name)."""
    agent = request.headers.get("User-Agent", "")
    return (agent.split("/")[0] or "unknown")[:128]


def _non_resource(request: web.Request, state: Management) -> web.Response:
    if request.method not in ("GET", "HEAD"):
        raise METHOD_NOT_ALLOWED
    path = request.path.rstrip("/") or "/"
    parts = [p for p in path.split("/") if p]
    if path == "/version":
        return _json(VERSION)
    if path in ("/readyz", "/livez", "/healthz"):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/api":
        return _json(kinds.api_versions(state.address))
    if path == "/apis":
        return _json(kinds.api_group_list())
    if path == "/api/v1":
        return _json(kinds.api_resource_list("", "v1"))
    if path == "/openapi/v3":
        return _json(openapi.index())
    if path == "/openapi/v3/api/v1":
        return _json(openapi.group_version_document("", "v1"))
    if len(parts) == 5 and parts[:3] == ["openapi", "v3", "apis"]:
        document = openapi.group_version_document(parts[3], parts[4])
        if document is not None:
            return _json(document)
    if len(parts) == 2 and parts[0] == "apis" and (group := kinds.api_group(parts[1])):
        return _json(group)
    if len(parts) == 3 and parts[0] == "apis":
        found = kinds.api_resource_list(parts[1], parts[2])
        if found is not None:
            return _json(found)
    raise PATH_NOT_FOUND


# --- patch and delete ------------------------------------------------------------------


def _patch(
    content_type: str,
    store: ObjectStore,
    target: Target,
    query: dict[str, str],
    body: bytes,
    manager: str,
    check: objects.FieldCheck,
) -> tuple[dict[str, Any], int]:
    kind = target.kind
    accepted = [JSON_PATCH, MERGE, APPLY] if kind.custom else [JSON_PATCH, MERGE, STRATEGIC, APPLY]
    if content_type not in accepted:
        raise unsupported_media_type(content_type, accepted)
    if content_type == APPLY:
        if target.subresource:
            raise bad_request("server-side apply to a subresource is not supported by the stand-in")
        if not query.get("fieldManager"):
            raise unprocessable(
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch"
            )
        try:
            applied = check(yaml.safe_load(body))
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from exc
        exists = store.exists(kind, target.namespace, target.name)
        result = store.apply(
            kind, target.namespace, target.name, applied, manager, truthy(query.get("force"))
        )
        return result, 200 if exists else 201
    patch = parse_json(body, "patch")
    old = store.get(kind, target.namespace, target.name)
    if content_type == JSON_PATCH:
        try:
            patched = json_patch(old, patch)
        except PatchFailed as exc:
            # As ``NewGenericServerResponse(422, ...)`` words it: the library's message is dropped.
            raise unprocessable(
                "the server rejected our request due to an error in our request"
            ) from exc
    else:
        if not isinstance(patch, dict):
            raise bad_request("a merge patch must be a JSON object")
        patched = merge_patch(old, patch)
    result = store.update(
        kind,
        target.namespace,
        target.name,
        check(patched),
        manager,
        subresource=target.subresource,
        require_version=False,
    )
    return result, 200


def _delete(store: ObjectStore, target: Target, body: bytes) -> dict[str, Any]:
    preconditions: dict[str, str] = {}
    if body.strip():
        options = parse_json(body, "DeleteOptions")
        given = options.get("preconditions") if isinstance(options, dict) else None
        if isinstance(given, dict):
            preconditions = {k: str(v) for k, v in given.items() if k in ("uid", "resourceVersion")}
    obj, gone = store.delete(target.kind, target.namespace, target.name, preconditions)
    if target.kind.custom or not gone:
        return obj
    details: dict[str, Any] = target.kind.resource.details(target.name)
    details["uid"] = obj["metadata"]["uid"]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def create_app(state: Management) -> web.Application:
    """The API server's application; its state is ``app[MANAGEMENT]``."""
    app = web.Application(client_max_size=3 * 1024 * 1024)
    app[MANAGEMENT] = state
    app.router.add_route("*", "/{tail:.*}", _front)
    return app


__all__ = ["MANAGEMENT", "Management", "create_app", "error_response"]
