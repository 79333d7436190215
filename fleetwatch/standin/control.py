"""The control API of a served fleet: list clusters, switch a cluster's mode.

Plain HTTP on 127.0.0.1, for ``fleetwatch demo down NAME`` and for tests that drive a
fleet running in another process. It never shows a token or a key.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from fleetwatch.standin.fleet import StandinCluster, StandinFleet

FLEET = web.AppKey("fleet", StandinFleet)


def cluster_json(cluster: StandinCluster) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "url": cluster.url,
        "mode": cluster.mode.value,
        "requests": cluster.requests,
    }


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _list(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    return web.json_response([cluster_json(c) for c in fleet.clusters.values()])


async def _get(request: web.Request) -> web.Response:
    cluster = request.app[FLEET].clusters.get(request.match_info["name"])
    if cluster is None:
        return _error(404, f"no cluster named {request.match_info['name']!r}")
    return web.json_response(cluster_json(cluster))


async def _set_mode(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    name = request.match_info["name"]
    if name not in fleet.clusters:
        return _error(404, f"no cluster named {name!r}")
    try:
        body = json.loads(await request.read())
    except ValueError:
        return _error(400, 'body must be JSON like {"mode": "down"}')
    mode = body.get("mode") if isinstance(body, dict) else None
    if not isinstance(mode, str):
        return _error(400, 'body must be JSON like {"mode": "down"}')
    try:
        cluster = await fleet.set_mode(name, mode)
    except ValueError as exc:
        return _error(400, str(exc))
    return web.json_response(cluster_json(cluster))


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def create_app(fleet: StandinFleet) -> web.Application:
    app = web.Application(client_max_size=64 * 1024)
    app[FLEET] = fleet
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/clusters", _list)
    app.router.add_get("/clusters/{name}", _get)
    app.router.add_put("/clusters/{name}/mode", _set_mode)
    return app
