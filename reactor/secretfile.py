"""A secret kept in a file that is rotated in place: ``--db.password-file``.

Secrets rotate without a restart. A Kubernetes Secret volume swaps its files, Vault's
agent or a person rewrites one, and the reactor must follow: every replica held on to the
old password until restarted, so the first connection after a rotation (a database
restart, a connection that died) failed with 503 for good.

:class:`SecretFile` gives the value to use now. It looks at the file (``stat``, at most
once a ``recheck_s``) whenever the value is asked for and reads it again when it changed;
a caller that was refused with the value (a failed authentication) asks for a re-read at
once (:meth:`SecretFile.reread`), which catches a change the last look missed. A file
that cannot be read, or reads empty, keeps the last good value, with a warning: the file
may be half written, and a connection that works must not be given up for it.

The value is never logged, nor its length; log lines name the file only. Safe to share
between threads (the store has one per connection).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: A secret file bigger than this is not a secret (a wrong path, e.g. a log file).
MAX_SECRET_BYTES = 4096

#: Seconds between two looks at the file.
RECHECK_S = 1.0


class SecretFileError(ValueError):
    """The file cannot give a secret; the message names the file, never its content."""


def read_secret(path: Path) -> str:
    """The secret in ``path``, surrounding whitespace (a final newline) removed."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise SecretFileError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise SecretFileError(f"{path}: more than {MAX_SECRET_BYTES} bytes, not a secret")
    try:
        secret = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SecretFileError(f"{path}: not UTF-8 text") from None
    if not secret:
        raise SecretFileError(f"{path} is empty")
    return secret


Signature = tuple[int, int, int, int, int]


def _signature(path: Path) -> Signature | None:
    """What changes when the file does (ctime too: ``cp -p`` keeps size and mtime); None
    when it cannot be looked at."""
    try:
        st = path.stat()  # follows symbolic links: a Secret volume's ..data swap shows
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class SecretFile:
    """The secret in ``path``, kept up to date; ``what`` names it in log lines.

    ``value``: the secret already read from the file (the command line reads it once to
    refuse a bad file at start); read now when not given (:class:`SecretFileError`).
    """

    def __init__(
        self,
        path: Path,
        what: str,
        *,
        value: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        recheck_s: float = RECHECK_S,
    ) -> None:
        self.path = path
        self.what = what
        self._clock = clock
        self._recheck_s = recheck_s
        self._lock = threading.Lock()
        self._signature = _signature(path)
        self._value = value if value is not None else read_secret(path)
        self._next_look = clock() + recheck_s
        #: why the last read failed; None: it did not
        self._failing: str | None = None

    def __repr__(self) -> str:
        return f"SecretFile({str(self.path)!r})"  # never the value

    def current(self) -> str:
        """The secret to use now: the file is read again first if it changed."""
        with self._lock:
            now = self._clock()
            if now >= self._next_look:
                self._next_look = now + self._recheck_s
                if _signature(self.path) != self._signature:
                    self._read()
            return self._value

    def reread(self) -> str:
        """Read the file now, changed or not (the value was refused); the secret to use."""
        with self._lock:
            self._next_look = self._clock() + self._recheck_s
            self._read()
            return self._value

    def _read(self) -> None:
        signature = _signature(self.path)
        try:
            value = read_secret(self.path)
        except SecretFileError as exc:
            self._signature = None  # look again next time
            if str(exc) != self._failing:  # said once while it fails the same way
                log.warning("%s %s; keeping the last good one", self.what, exc)
            self._failing = str(exc)
            return
        if self._failing is not None:
            log.info("%s %s can be read again", self.what, self.path)
            self._failing = None
        self._signature = signature
        if value != self._value:
            self._value = value
            log.info("%s %s re-read: it changed", self.what, self.path)
