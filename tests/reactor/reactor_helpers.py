"""Helpers shared by the reactor tests (a module of its own: every test folder has a conftest)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


def dump_db(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read-only (works while a reactor has the file open)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            t: db.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
            for t in ("clusters", "outages", "apps")
        }
    finally:
        db.close()
