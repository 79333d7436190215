"""Which database the reactor uses: ``--db.url`` parsed, shown without its password, opened.

``sqlite:///PATH`` (a relative path; ``sqlite:////abs/path`` for an absolute one;
``sqlite:///:memory:`` for a private database that dies with the process) or
``postgresql://user@host:port/db`` (``postgres://`` too; libpq's query parameters such as
``sslmode`` pass through). The password never travels inside a string we may log: it is
taken out of the URL, and ``--db.password-file`` or ``PGPASSWORD`` win over it. A password
file is followed as it rotates (``reactor.secretfile``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from reactor.secretfile import SecretFile
from reactor.store import Store
from reactor.store.postgres import PostgresStore
from reactor.store.sqlite import SQLiteStore

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
REDACTED = "xxxxx"


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    kind: str  #: SQLITE or POSTGRESQL
    path: Path | None = None  #: the SQLite file
    conninfo: str = ""  #: the PostgreSQL URL without any password
    password: str | None = field(default=None, repr=False)  #: from the URL, if it had one

    def shown(self) -> str:
        """The URL for a log line: a password it carried is shown as ``xxxxx``."""
        if self.kind == SQLITE:
            return f"sqlite:///{self.path}"
        if self.password is None:
            return self.conninfo
        parts = urlsplit(self.conninfo)
        netloc = (
            parts.netloc.replace("@", f":{REDACTED}@", 1)
            if "@" in parts.netloc
            else (f":{REDACTED}@{parts.netloc}")
        )
        return urlunsplit(parts._replace(netloc=netloc))


def sqlite_url(path: Path) -> DatabaseUrl:
    return DatabaseUrl(SQLITE, path=path)


def parse_db_url(text: str) -> DatabaseUrl:
    """Raise ValueError with a message that never repeats a password."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ValueError("--db.url must start with sqlite:// or postgresql://")
    scheme = scheme.lower()
    if scheme == SQLITE:
        if not rest.startswith("/") or rest == "/":
            raise ValueError(
                "--db.url sqlite:///PATH needs a path after the third slash "
                "(sqlite:///fleetwatch.db, sqlite:////var/lib/fleetwatch/state.db)"
            )
        return sqlite_url(Path(unquote(rest[1:])))
    if scheme not in (POSTGRESQL, "postgres"):
        raise ValueError(f"--db.url: unknown scheme {scheme!r} (sqlite or postgresql)")
    parts = urlsplit(text)
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise ValueError("--db.url: the port is not a number") from None
    if not parts.hostname and "host" not in dict(parse_qsl(parts.query)):
        raise ValueError("--db.url postgresql://user@host:port/db needs a host")
    password = unquote(parts.password) if parts.password is not None else None
    query = parse_qsl(parts.query, keep_blank_values=True)
    for key, value in query:
        if key == "password":
            password = value
    netloc = parts.hostname or ""
    if ":" in netloc:  # an IPv6 address
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    if parts.username is not None:
        netloc = f"{quote(unquote(parts.username), safe='')}@{netloc}"
    clean = urlunsplit(
        (
            POSTGRESQL,
            netloc,
            parts.path,
            urlencode([(k, v) for k, v in query if k != "password"]),
            "",
        )
    )
    return DatabaseUrl(POSTGRESQL, conninfo=clean, password=password)


def open_store(
    url: DatabaseUrl,
    *,
    password: str | None = None,
    password_file: Path | None = None,
    busy_timeout_s: float = 5.0,
) -> Store:
    """Open (and migrate) the store ``url`` names. ``password``: wins over the URL's;
    ``password_file``: where ``password`` was read, read again when it changes and when a
    connection is refused."""
    if url.kind == SQLITE:
        assert url.path is not None
        return SQLiteStore(url.path, busy_timeout_s=busy_timeout_s)
    secret: str | SecretFile | None = password if password is not None else url.password
    if password_file is not None:
        secret = SecretFile(password_file, "--db.password-file", value=password)
    return PostgresStore(url.conninfo, password=secret, busy_timeout_s=busy_timeout_s)
