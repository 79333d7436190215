"""The peer for the reactor benchmark: a bare aiohttp server with no store and no logic.

``GET /hello`` answers a fixed text; ``POST /deployments`` parses the JSON body and
answers 201 with a small JSON object, which is the least any real handler does. The
reactor's own ``POST /deployments`` is reported as a ratio of this one, measured in
the same run on the same machine.

Run: ``.venv/bin/python -m bench.bare_server --port 8080`` (listens on 127.0.0.1 only).
"""

from __future__ import annotations

import argparse

from aiohttp import web


async def hello(request: web.Request) -> web.Response:
    return web.Response(text="hello")


async def deployments(request: web.Request) -> web.Response:
    body = await request.json()
    if not isinstance(body, dict) or "app" not in body:
        return web.json_response({"error": "app is required"}, status=400)
    return web.json_response({"app": body["app"], "status": "DEPLOYED"}, status=201)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def create_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/deployments", deployments)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(create_app(), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
