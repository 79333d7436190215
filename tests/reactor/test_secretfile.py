"""``reactor.secretfile``: a secret file followed as it rotates, its last good value kept
while it cannot be read, and never shown. (Against a real PostgreSQL: test_db_password.py.)"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from reactor.secretfile import SecretFile, SecretFileError
from reactor.store.database import open_store, parse_db_url


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_changed_file_is_read_at_the_next_look(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("one\n")
    clock = Clock()
    secret = SecretFile(path, "--db.password-file", clock=clock, recheck_s=1.0)
    assert secret.current() == "one"
    path.write_text("two\n")
    assert secret.current() == "one"  # not looked at again within a second
    clock.now = 1.0
    assert secret.current() == "two"
    # Renamed into place, as a Secret volume swaps its files: followed too.
    (tmp_path / "new").write_text("three")
    os.replace(tmp_path / "new", path)
    clock.now = 2.0
    assert secret.current() == "three"


def test_reread_reads_at_once(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("one")
    secret = SecretFile(path, "password", clock=Clock(), recheck_s=3600)
    path.write_text("two")
    assert secret.current() == "one"
    assert secret.reread() == "two" == secret.current()


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "No such file"), ("", "is empty"), (" \n", "is empty"), ("x" * 5000, "not a secret")],
)
def test_a_file_that_cannot_give_a_secret_keeps_the_last_good_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str | None, problem: str
) -> None:
    path = tmp_path / "secret"
    path.write_text("s3cret-value")
    secret = SecretFile(path, "--db.password-file", clock=Clock(), recheck_s=3600)
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    with caplog.at_level(logging.INFO, logger="reactor.secretfile"):
        assert secret.reread() == "s3cret-value"
        assert secret.reread() == "s3cret-value"
        path.write_text("n3w-value")
        assert secret.reread() == "n3w-value"
    lines = [r.getMessage() for r in caplog.records]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and problem in warnings[0], lines  # said once, not every look
    assert f"--db.password-file {path} can be read again" in lines
    assert not any("s3cret" in line or "n3w" in line for line in lines)


def test_the_secret_never_shows(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("s3cret-value")
    assert "s3cret" not in repr(SecretFile(path, "password"))
    path.write_text("")
    with pytest.raises(SecretFileError, match="is empty"):
        SecretFile(path, "password")


def test_sqlite_takes_no_password_file(tmp_path: Path) -> None:
    store = open_store(
        parse_db_url(f"sqlite:///{tmp_path / 'state.db'}"),
        password_file=tmp_path / "never-read",
    )
    store.close()
