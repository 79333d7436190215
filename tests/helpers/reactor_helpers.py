"""Helpers shared by the reactor tests (a module of its own: every test folder has a conftest)."""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from aiohttp.test_utils import TestClient

from reactor.alertmanager.signals import Signal, parse_webhook, status_signals
from reactor.store import Store
from reactor.store.postgres import PostgresStore
from reactor.store.sqlite import SQLiteStore
from tests.helpers.reactor_payloads import webhook

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


#: A test's ``db_path`` with this suffix is not a SQLite file: it holds the URL of the
#: test's PostgreSQL database (conftest.py, the ``postgresql`` parameter of ``database``).
POSTGRES_URL_SUFFIX = ".pgurl"
TABLES = ("clusters", "outages", "apps")


def postgres_url(path: Path) -> str | None:
    """The PostgreSQL URL ``path`` holds, or None when it is a SQLite file."""
    return path.read_text().strip() if path.suffix == POSTGRES_URL_SUFFIX else None


def db_flag(path: Path) -> str:
    """The ``fleetwatch reactor`` flag that names the test's database."""
    url = postgres_url(path)
    return f"--db.path={path}" if url is None else f"--db.url={url}"


def open_store(path: Path) -> Store:
    """The store behind ``path`` (SQLite file or PostgreSQL database), migrated."""
    url = postgres_url(path)
    return SQLiteStore(path) if url is None else PostgresStore(url)


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """The rows of one read-only statement (plain SQL both stores speak, no parameters)."""
    url = postgres_url(path)
    if url is not None:
        with psycopg.connect(url) as conn:
            return conn.execute(sql).fetchall()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


@contextmanager
def hold_write_lock(path: Path) -> Iterator[None]:
    """Another writer holds the database's write locks meanwhile; plain reads still run.

    SQLite: a transaction that took the write lock. PostgreSQL: the tables locked in
    EXCLUSIVE mode, which stops every row lock (``FOR UPDATE``/``FOR SHARE``) and write.
    """
    url = postgres_url(path)
    if url is not None:
        with psycopg.connect(url) as conn:
            conn.execute("LOCK TABLE clusters, apps, outages IN EXCLUSIVE MODE")
            yield
            conn.rollback()
        return
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def dump_db(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read-only (works while a reactor has the database open)."""
    url = postgres_url(path)
    if url is not None:
        with psycopg.connect(url) as conn:
            return {t: conn.execute(f"SELECT * FROM {t} ORDER BY id").fetchall() for t in TABLES}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY id").fetchall() for t in TABLES}
    finally:
        db.close()


async def until(check: Callable[[], Any], within: float = 15.0, what: str = "") -> Any:
    """Poll ``check`` (a function, or one that returns an awaitable) until its value is
    truthy, and return that value: a deadline, never a fixed sleep."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {within:g} s: {what or 'the condition'}"
        await asyncio.sleep(0.02)


def at_once(work: Callable[[], None], count: int) -> list[BaseException]:
    """``work`` in ``count`` threads released together (a barrier), as replicas starting
    at the same moment; what each raised, once all have ended."""
    gate = threading.Barrier(count)
    failures: list[BaseException] = []

    def one() -> None:
        try:
            gate.wait()
            work()
        except BaseException as exc:  # reported to the caller
            failures.append(exc)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return failures


def signals_of(payload: dict[str, Any]) -> tuple[Signal, ...]:
    """The status signals of a webhook payload, as the reactor's handler reads them."""
    return status_signals(parse_webhook(json.dumps(payload).encode())).signals


async def notify(client: Any, *alerts: dict[str, Any]) -> None:
    """POST a webhook of ``alerts``; it must be taken (200)."""
    resp = await client.post("/alerts", json=webhook(*alerts))
    assert resp.status == 200, await resp.text()


async def mirrored(client: Any, check: Callable[[dict[str, Any]], bool]) -> bool:
    """``check`` over the reactor's apps by name (``GET /apps``)."""
    apps = {a["name"]: a for a in await (await client.get("/apps")).json()}
    return check(apps)
