"""A real PostgreSQL 15 server for tests and benchmarks, in a temporary folder.

Debian's server binaries refuse to run as root: as root, the folder is handed to the
``postgres`` user and every server command runs through ``runuser``. The server listens on
127.0.0.1 on a free port (and a Unix socket in the folder), trusts local connections, and
is stopped by its data folder (``pg_ctl``), or by the pid it wrote when that fails.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

import psycopg

from fleetwatch.procs import free_port

BINARIES = Path("/usr/lib/postgresql/15/bin")
USER = "fw"


class PostgresMissing(RuntimeError):
    """PostgreSQL 15 is not installed on this machine."""


class PostgresServer:
    """One server: :meth:`start`, :meth:`create_database`, :meth:`stop` (and start again)."""

    def __init__(self, root: Path, *, durable: bool = False) -> None:
        if not (BINARIES / "pg_ctl").exists():
            raise PostgresMissing(
                f"PostgreSQL 15 is not installed ({BINARIES}/pg_ctl is missing): "
                "run scripts/install.sh (Debian package postgresql)"
            )
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self.port = free_port()
        #: durable=False: fsync off, as a test database needs no crash safety of its own
        self.durable = durable
        self._names = itertools.count(1)
        self._as_root = os.geteuid() == 0

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(BINARIES / argv[0]), *argv[1:]]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)

    def init(self) -> PostgresServer:
        if self._as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        done = self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", USER, "-E", "UTF8", "--no-sync",
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed in {self.root}: {done.stderr.strip()}")
        return self

    def require_passwords(self) -> PostgresServer:
        """Before :meth:`start`: connections over TCP (the reactor's, :meth:`url`) must give
        the role's password (SCRAM); the Unix socket in the folder stays trusted, for
        :meth:`admin`."""
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
        )
        return self

    def admin(self, database: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """A connection over the Unix socket (trusted even with :meth:`require_passwords`)."""
        return psycopg.connect(
            host=str(self.root), port=self.port, user=USER, dbname=database, autocommit=True
        )

    def start(self) -> PostgresServer:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
            "-c max_connections=200 -c shared_buffers=128MB"
        )
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        done = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start",
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {done.stdout}{done.stderr}\n{tail}")
        return self

    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back and disconnect; ``immediate``: a crash)."""
        pid = self.pid()
        done = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)
        if done.returncode != 0 and pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database; returns its URL."""
        name = f"{prefix}{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
