"""Placeholder: `fleetwatch reactor` and `fleetwatch status` (issue 3)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(subparsers: Any) -> None:
    for name in ("reactor", "status"):
        p: argparse.ArgumentParser = subparsers.add_parser(name, help="(not built yet)")
        p.set_defaults(func=lambda args: 2)
