"""Small HTTP pieces the tests' own servers and clients share.

``QuietHandler`` is the base of the stand-in servers written with ``http.server`` (a
reactor answering ``fleetwatch explain``, a flaky webhook proxy, a metrics page): it logs
nothing (``http.server`` writes every request to stderr) and sends a body with its length.
``fetch`` is one plain GET or POST that returns the status and the text of any answer,
errors included, where ``urllib`` would raise on a 4xx or 5xx.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with :meth:`send_body`."""

    def send_body(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, body: Any) -> None:
        self.send_body(status, json.dumps(body).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


def fetch(
    url: str,
    *,
    timeout: float = 5,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, str]:
    """The status and text of ``url``'s answer (a POST of ``data`` if given)."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
