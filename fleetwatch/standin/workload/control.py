"""The control API of a served fleet: list clusters, switch modes, change a topology.

Plain HTTP on 127.0.0.1, for ``fleetwatch demo down NAME`` and for tests that drive a
fleet running in another process. It never shows a token or a key.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from fleetwatch.standin.workload.controlplane import ControlPlane
from fleetwatch.standin.workload.fleet import StandinCluster, StandinFleet

FLEET = web.AppKey("fleet", StandinFleet)


def cluster_json(cluster: StandinCluster) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "url": cluster.url,
        "mode": cluster.mode.value,
        "requests": cluster.requests,
    }


def blocked_json(cluster: StandinCluster) -> dict[str, Any]:
    return {"name": cluster.name, "common_names": sorted(cluster.blocked_clients)}


async def _get_blocked_clients(request: web.Request) -> web.Response:
    cluster = request.app[FLEET].clusters.get(request.match_info["name"])
    if cluster is None:
        return _error(404, f"no cluster named {request.match_info['name']!r}")
    return web.json_response(blocked_json(cluster))


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


async def _set_blocked_clients(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    name = request.match_info["name"]
    if name not in fleet.clusters:
        return _error(404, f"no cluster named {name!r}")
    usage = 'body must be JSON like {"common_names": ["exporter-a"]}'
    try:
        body = json.loads(await request.read())
    except ValueError:
        return _error(400, usage)
    names = body.get("common_names") if isinstance(body, dict) else None
    if set(body if isinstance(body, dict) else ()) != {"common_names"} or not (
        isinstance(names, list) and all(isinstance(n, str) for n in names)
    ):
        return _error(400, usage)
    try:
        cluster = await fleet.set_blocked_clients(name, names)
    except ValueError as exc:
        return _error(400, str(exc))
    return web.json_response(blocked_json(cluster))


def plane_json(plane: ControlPlane) -> dict[str, Any]:
    return {
        "nodes": plane.nodes,
        "workers": plane.workers,
        "localhost_bound": sorted(plane.localhost_bound),
        "etcd_not_ready": sorted(plane.etcd_not_ready),
        "nodes_not_ready": sorted(plane.nodes_not_ready),
        "coredns_nodes": list(plane.coredns_nodes),
        "serve_metrics": plane.serve_metrics,
    }


_PLANE_FIELDS = frozenset(plane_json(ControlPlane()))


def _parse_plane(body: object, current: ControlPlane) -> ControlPlane:
    """A partial update of the topology; ``ValueError`` names what is wrong."""
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object of control-plane fields")
    unknown = set(body) - _PLANE_FIELDS
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}; known: {sorted(_PLANE_FIELDS)}")
    merged = {**plane_json(current), **body}
    for key in ("nodes", "workers"):
        if type(merged[key]) is not int:
            raise ValueError(f"{key} must be an integer")
    if not isinstance(merged["serve_metrics"], bool):
        raise ValueError("serve_metrics must be true or false")
    for key in ("localhost_bound", "etcd_not_ready", "nodes_not_ready", "coredns_nodes"):
        value = merged[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{key} must be a list of strings")
    return ControlPlane(
        nodes=merged["nodes"],
        workers=merged["workers"],
        localhost_bound=frozenset(merged["localhost_bound"]),
        etcd_not_ready=frozenset(merged["etcd_not_ready"]),
        nodes_not_ready=frozenset(merged["nodes_not_ready"]),
        coredns_nodes=tuple(merged["coredns_nodes"]),
        serve_metrics=merged["serve_metrics"],
    )


async def _get_plane(request: web.Request) -> web.Response:
    cluster = request.app[FLEET].clusters.get(request.match_info["name"])
    if cluster is None:
        return _error(404, f"no cluster named {request.match_info['name']!r}")
    return web.json_response(plane_json(cluster.control_plane))


async def _set_plane(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    cluster = fleet.clusters.get(request.match_info["name"])
    if cluster is None:
        return _error(404, f"no cluster named {request.match_info['name']!r}")
    try:
        plane = _parse_plane(json.loads(await request.read()), cluster.control_plane)
    except ValueError as exc:  # JSON errors are ValueErrors too
        return _error(400, str(exc))
    await fleet.set_control_plane(cluster.name, plane)
    return web.json_response(plane_json(plane))


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def create_app(fleet: StandinFleet) -> web.Application:
    app = web.Application(client_max_size=64 * 1024)
    app[FLEET] = fleet
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/clusters", _list)
    app.router.add_get("/clusters/{name}", _get)
    app.router.add_put("/clusters/{name}/mode", _set_mode)
    app.router.add_get("/clusters/{name}/blocked-clients", _get_blocked_clients)
    app.router.add_put("/clusters/{name}/blocked-clients", _set_blocked_clients)
    app.router.add_get("/clusters/{name}/control-plane", _get_plane)
    app.router.add_put("/clusters/{name}/control-plane", _set_plane)
    return app
