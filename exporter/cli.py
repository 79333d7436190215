"""Placeholder: `fleetwatch exporter` and `fleetwatch discover` (issue 2)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(subparsers: Any) -> None:
    for name in ("exporter", "discover"):
        p: argparse.ArgumentParser = subparsers.add_parser(name, help="(not built yet)")
        p.set_defaults(func=lambda args: 2)
