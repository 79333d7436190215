"""The landing page at ``/`` of both servers, as Prometheus' exporter-toolkit serves one.

Someone who opens the server's address in a browser (or ``curl``s it while debugging a
ServiceMonitor) sees what runs there, which version, and where its endpoints are, instead
of a 404. The page is built once, at start: it names no setting and no credential.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from fleetwatch.common.version import __version__


def landing_page(name: str, description: str, links: Sequence[tuple[str, str]]) -> bytes:
    """An HTML page: ``name`` and the version, ``description``, then each ``(path, what)``."""
    items = "\n".join(
        f'<li><a href="{escape(path)}">{escape(path)}</a>: {escape(what)}</li>'
        for path, what in links
    )
    title = f"{escape(name)} {escape(__version__)}"
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n'
        f"<body><h1>{title}</h1>\n<p>{escape(description)}</p>\n<ul>\n{items}\n</ul>\n"
        "</body></html>\n"
    ).encode()
