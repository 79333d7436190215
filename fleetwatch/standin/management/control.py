"""The management cluster's control API: faults, watches, compaction, counts, tokens, seeds.

Plain HTTP on 127.0.0.1, like the workload fleet's control API, for tests and the demo
that drive a server in another process. Errors are ``{"error": ...}`` with 400 or 404; a
bad body changes nothing.

| call | effect |
|---|---|
| ``GET /`` | revision, compacted revision, open watches, armed faults |
| ``POST /faults`` ``{"kind": "error", "count": 2}`` | arm a fault (``faults.py``) |
| ``DELETE /faults`` | disarm all; hung requests are answered 500 |
| ``POST /watches/close`` | end every open watch now |
| ``POST /compact`` | forget the event history: older watches get 410 |
| ``GET /requests``, ``DELETE /requests`` | request counts by verb and resource; reset |
| ``GET /audit`` | every write answered: user, User-Agent, verb, object, code (``audit.py``) |
| ``POST /tokens`` ``{"user": "u", "namespaces": ["a"]}`` | a new bearer token |
| ``POST /objects`` (JSON list, or YAML documents) | create or update objects, as an admin |
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from aiohttp import web

from fleetwatch.standin.management.api import Management
from fleetwatch.standin.management.faults import parse_fault
from fleetwatch.standin.management.seed import seed_objects
from fleetwatch.standin.management.status import ApiError

STATE = web.AppKey("management-control", Management)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _summary(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return web.json_response(
        {
            "revision": state.store.revision,
            "compacted": state.store.compacted,
            "watches": len(state.store.watchers),
            "faults": [f.describe() for f in state.faults.faults if f.active()],
        }
    )


async def _arm(request: web.Request) -> web.Response:
    state = request.app[STATE]
    try:
        fault = parse_fault(json.loads(await request.read()))
    except ValueError as exc:
        return _error(400, str(exc))
    state.faults.arm(fault)
    return web.json_response(fault.describe(), status=201)


async def _clear(request: web.Request) -> web.Response:
    request.app[STATE].faults.clear()
    return web.json_response({"faults": []})


async def _close_watches(request: web.Request) -> web.Response:
    return web.json_response({"closed": request.app[STATE].store.close_watches()})


async def _compact(request: web.Request) -> web.Response:
    return web.json_response({"compacted": request.app[STATE].store.compact()})


async def _requests(request: web.Request) -> web.Response:
    faults = request.app[STATE].faults
    return web.json_response({"counts": dict(faults.counts), "writes": faults.writes()})


async def _reset_requests(request: web.Request) -> web.Response:
    request.app[STATE].faults.counts.clear()
    return web.json_response({"counts": {}, "writes": 0})


async def _audit(request: web.Request) -> web.Response:
    return web.json_response({"events": request.app[STATE].audit.as_json()})


def _strings(body: dict[str, Any], key: str) -> list[str] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of strings")
    return list(value)


async def _token(request: web.Request) -> web.Response:
    state = request.app[STATE]
    try:
        body = json.loads(await request.read())
        if not isinstance(body, dict) or not isinstance(body.get("user"), str):
            raise ValueError('body must be JSON like {"user": "reader", "namespaces": ["a"]}')
        token = state.tokens.issue(
            body["user"],
            namespaces=_strings(body, "namespaces"),
            verbs=_strings(body, "verbs"),
            resources=_strings(body, "resources"),
        )
    except ValueError as exc:
        return _error(400, str(exc))
    return web.json_response({"user": body["user"], "token": token}, status=201)


async def _objects(request: web.Request) -> web.Response:
    state = request.app[STATE]
    text = (await request.read()).decode()
    try:
        # JSON first: thousands of objects parse in milliseconds, where PyYAML takes seconds.
        loaded = [json.loads(text)]
    except ValueError:
        try:
            loaded = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            return _error(400, f"not YAML or JSON: {exc}")
    docs = loaded[0] if len(loaded) == 1 and isinstance(loaded[0], list) else loaded
    try:
        stored = seed_objects(state.store, docs)
    except (ValueError, ApiError) as exc:
        return _error(400, str(exc))
    summary = [
        {
            "kind": o["kind"],
            "namespace": o["metadata"].get("namespace", ""),
            "name": o["metadata"]["name"],
            "resourceVersion": o["metadata"]["resourceVersion"],
        }
        for o in stored
    ]
    return web.json_response({"objects": summary}, status=201)


#: The largest control request: a seed of thousands of Secrets in one call (5,000 Argo CD
#: cluster Secrets carrying a CA are about 14 MiB), so a benchmark can rewrite them all at once.
MAX_CONTROL_BODY = 64 << 20


def create_control_app(state: Management) -> web.Application:
    app = web.Application(client_max_size=MAX_CONTROL_BODY)
    app[STATE] = state
    app.router.add_get("/", _summary)
    app.router.add_post("/faults", _arm)
    app.router.add_delete("/faults", _clear)
    app.router.add_post("/watches/close", _close_watches)
    app.router.add_post("/compact", _compact)
    app.router.add_get("/requests", _requests)
    app.router.add_delete("/requests", _reset_requests)
    app.router.add_get("/audit", _audit)
    app.router.add_post("/tokens", _token)
    app.router.add_post("/objects", _objects)
    return app
