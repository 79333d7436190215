"""Placeholder: `fleetwatch demo` (issue 4)."""

from __future__ import annotations

from typing import Any


def add_parsers(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="(not built yet)")
    p.set_defaults(func=lambda args: 2)
