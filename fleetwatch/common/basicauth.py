"""Basic authentication of ``--web.config.file``'s ``basic_auth_users``, for both servers.

Basic authentication guards every path, as in exporter-toolkit. A bcrypt check costs a
few hundred milliseconds of CPU on purpose, and Prometheus sends the same credentials with
every scrape, so a checked (user, password) pair is remembered (exporter-toolkit caches
too); checks run one at a time in a worker thread, so wrong passwords cost one core at
most and never stall the event loop.

A flood of wrong passwords must not reach the scrapes. So the pairs that passed and those
that failed are remembered apart: a pair that passed stays remembered for as long as it
keeps coming (each use extends it by :data:`CACHE_TTL_S`), and no number of wrong ones
can push it out, so a scrape with the right password is answered without waiting behind
any bcrypt check. And no more than :data:`MAX_WAITING` checks wait their turn: beyond
that a new pair is refused at once (401, no bcrypt), so a flood's cost stays one core and
its queue stays short for the first check of a legitimate client once it ends. Measured
before: 40 threads of wrong passwords made each correct scrape wait 2.8-3.0 s, 150 threads
10 s (``tests/test_operating_surface_webguard.py`` now holds it under 100 ms).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import bcrypt
from aiohttp import web

log = logging.getLogger(__name__)

#: Seconds a checked (user, password) pair is remembered; a scrape every 15-60 s pays one
#: bcrypt check per this many seconds instead of one per scrape.
CACHE_TTL_S: Final = 60.0
#: Pairs remembered at most, of each kind (exporter-toolkit keeps 100).
CACHE_SIZE: Final = 100
#: bcrypt checks waiting for the one running, at most; more are refused without one.
MAX_WAITING: Final = 8

#: Checked against when the user is unknown, so an unknown user costs what a known one
#: does and the answer time does not tell which user names exist. (bcrypt of "fleetwatch")
_DUMMY_HASH: Final = b"$2b$10$Hhbh8fxGMXYnAzv3pbNxoueaVIWavIG9Xc.Y1mzdaIqeIq/siF7Ym"


class BasicAuth:
    """Checks ``Authorization: Basic`` against the bcrypt hashes, remembering recent answers.

    The caches are keyed by a SHA-256 of (user, password, hash): the password is never kept
    in memory, and a changed hash never matches an old entry. Wrong answers are remembered
    too, so repeating a wrong password costs no second bcrypt check either; they live in a
    cache of their own, which a flood fills without touching the good one.
    """

    def __init__(
        self,
        users: Mapping[str, bytes],
        *,
        ttl_s: float = CACHE_TTL_S,
        size: int = CACHE_SIZE,
        max_waiting: int = MAX_WAITING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = dict(users)
        self._ttl_s = ttl_s
        self._size = size
        self._max_waiting = max_waiting
        self._clock = clock
        self._good: OrderedDict[bytes, float] = OrderedDict()
        self._bad: OrderedDict[bytes, float] = OrderedDict()
        self._lock = asyncio.Lock()
        self._waiting = 0
        self.bcrypt_checks = 0  #: how many bcrypt checks ran (the cache's effect, in tests)
        self.refused_busy = 0  #: pairs refused unchecked, the queue being full

    async def check(self, header: str) -> bool:
        """True when ``header`` (the Authorization value) names a user and their password."""
        credentials = parse_basic(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self.users.get(user)
        # JSON keeps the three apart whatever bytes they hold (no user:password ambiguity).
        pair = json.dumps([user, password, (hashed or b"").decode()]).encode()
        key = hashlib.sha256(pair).digest()
        found = self._cached(key)
        if found is not None:
            return found
        if self._waiting >= self._max_waiting:
            self.refused_busy += 1
            log.debug("basic auth: %d checks waiting, one more refused unchecked", self._waiting)
            return False
        self._waiting += 1
        try:
            async with self._lock:  # one bcrypt at a time; the pair may be cached meanwhile
                found = self._cached(key)
                if found is not None:
                    return found
                ok = await asyncio.to_thread(_bcrypt_ok, password.encode(), hashed)
                self.bcrypt_checks += 1
        finally:
            self._waiting -= 1
        cache = self._good if ok else self._bad
        cache[key] = self._clock() + self._ttl_s
        cache.move_to_end(key)
        while len(cache) > self._size:
            cache.popitem(last=False)
        return ok

    def _cached(self, key: bytes) -> bool | None:
        now = self._clock()
        expires = self._good.get(key)
        if expires is not None:
            if now < expires:
                self._good[key] = now + self._ttl_s  # kept while it keeps coming
                self._good.move_to_end(key)
                return True
            del self._good[key]
        expires = self._bad.get(key)
        if expires is not None:
            if now < expires:
                return False
            del self._bad[key]
        return None


def _bcrypt_ok(password: bytes, hashed: bytes | None) -> bool:
    try:
        ok = bcrypt.checkpw(password, hashed or _DUMMY_HASH)
    except ValueError:  # a password over 72 bytes (bcrypt 5 refuses it) or a bad salt
        return False
    return ok and hashed is not None


def parse_basic(header: str) -> tuple[str, str] | None:
    """``Basic base64(user:password)`` -> (user, password), else None (as Go's BasicAuth)."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except ValueError:  # not base64 (binascii.Error), not ASCII, not UTF-8 once decoded
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Another credential the server accepts in place of basic auth (the reactor's bearer token).
Alternative = Callable[[web.Request], bool]


def basic_auth_middleware(auth: BasicAuth, also_accept: Alternative | None = None) -> Any:
    """aiohttp middleware: 401 with ``WWW-Authenticate: Basic`` unless the request passes.

    ``also_accept(request)`` True lets a request through without basic auth: the reactor
    passes its bearer-token check, since a webhook sender (Alertmanager) can send one
    ``Authorization`` header, not two.
    """

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        if await auth.check(header) or (also_accept is not None and also_accept(request)):
            return await handler(request)
        log.debug("basic auth refused: %s %s", request.method, request.path)
        return web.Response(
            status=401,
            text="Unauthorized\n",
            headers={"WWW-Authenticate": 'Basic realm="fleetwatch"'},
        )

    return middleware
