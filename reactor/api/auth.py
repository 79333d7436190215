"""The bearer token the reactor's API requires, and the file it may come from.

A token file is re-read when it changes (identity, size, times or mode, looked at no more
than once a second, by the requests that need the token) and on SIGHUP, as Prometheus and
Alertmanager reload on a HUP: rotating the token needs no restart, and a Kubernetes Secret
volume that swaps its files is followed. A file that cannot be read, reads empty, or holds
more than one word (two lines) keeps the last good token (the reactor never falls open to
"no authentication", nor locks everyone out), with a warning. A file other users may read
gets a warning too: the token is the one credential of every mutating call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import stat
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from reactor.secretfile import SecretFileError, read_secret

log = logging.getLogger(__name__)

#: Seconds between two looks at the token file.
RECHECK_S = 1.0


class TokenFileError(ValueError):
    """The token file cannot give a token; the message names the file, never its content."""


def read_token(path: Path) -> str:
    """The token in ``path``, surrounding whitespace removed (read as every secret file is,
    ``reactor.secretfile.read_secret``), and one word."""
    try:
        token = read_secret(path)
    except SecretFileError as exc:
        raise TokenFileError(str(exc)) from None
    if any(ch.isspace() or not ch.isprintable() for ch in token):
        # A bearer token is one word (RFC 6750's token68). Two lines are a file caught
        # mid-write or two tokens pasted together: taking them as the token would lock
        # every client out without a word, so the last good token stays.
        raise TokenFileError(f"{path} holds whitespace or a line break inside the token")
    return token


def warn_if_readable_by_others(path: Path, mode: int) -> bool:
    """Log a warning when the file's mode lets group or others read it; True if it did."""
    if not mode & (stat.S_IRGRP | stat.S_IROTH):
        return False
    log.warning(
        "token file %s is readable by other users (mode %04o): chmod 600 it "
        "(in Kubernetes, defaultMode: 0400 on the Secret volume)",
        path,
        stat.S_IMODE(mode),
    )
    return True


Signature = tuple[int, int, int, int, int, int]


def _signature(st: os.stat_result) -> Signature:
    """What changes when the file does: ctime too, as a rewrite that keeps size and mtime
    (``cp -p``, ``touch -r``) still changes it."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


class TokenSource:
    """The token to require now: a fixed one, or the content of a file kept up to date."""

    def __init__(
        self,
        token: str | None,
        path: Path | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        recheck_s: float = RECHECK_S,
    ) -> None:
        self._token = token
        self.path = path
        self._clock = clock
        self._recheck_s = recheck_s
        self._next_check = clock() + recheck_s
        self._signature: Signature | None = None
        if path is not None:
            self.reload()

    def current(self) -> str | None:
        """The token (None: no authentication); a changed file is re-read first."""
        if self.path is not None and self._clock() >= self._next_check:
            self._next_check = self._clock() + self._recheck_s
            try:
                signature = _signature(self.path.stat())
            except OSError:
                signature = None
            if signature != self._signature:
                self.reload()
        return self._token

    def reload(self) -> bool:
        """Read the file again now (SIGHUP); True when it gave a token."""
        if self.path is None:
            return False
        try:
            st = self.path.stat()
            token = read_token(self.path)
        except (OSError, TokenFileError) as exc:
            self._signature = None  # look again at the next check
            kept = "keeping the last good token" if self._token else "no token yet"
            log.warning("token file %s cannot be read (%s); %s", self.path, _reason(exc), kept)
            return False
        if self._signature != _signature(st):
            warn_if_readable_by_others(self.path, st.st_mode)
        changed = self._token is not None and token != self._token
        self._signature = _signature(st)
        self._token = token
        if changed:
            log.info("token file %s re-read: the bearer token changed", self.path)
        return True


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    return str(exc)


TOKEN = web.AppKey("token", TokenSource)


async def reload_token_on_sighup(app: web.Application) -> None:
    """``app.on_startup`` hook of the ``fleetwatch reactor`` process: SIGHUP re-reads the file.

    Installed by the process (the command line), not by the app factory: a signal handler
    is process-wide, and tests build many apps in one process.
    """
    loop = asyncio.get_running_loop()
    source = app[TOKEN]
    if source.path is None:
        return

    def hup() -> None:
        log.info("SIGHUP: re-reading the token file %s", source.path)
        source.reload()

    loop.add_signal_handler(signal.SIGHUP, hup)  # gone with the loop when the process ends
