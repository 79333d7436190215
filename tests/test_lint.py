"""ruff and mypy are part of the suite, so CI refuses code the linter, the formatter or the
type checker would object to."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers.commands import run_ok

ROOT = Path(__file__).resolve().parent.parent


def ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: it is in the [test] extra of pyproject.toml")
    return found


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff_is_clean(args: list[str]) -> None:
    run_ok([ruff(), *args], cwd=ROOT, timeout=120)


#: Packages held to ``mypy --strict``: every package of the product. Imported modules of
#: packages not listed are read for their types but not reported (``--follow-imports=silent``).
MYPY_STRICT = ["fleetwatch", "exporter", "reactor", "alerts", "dashboards"]


def test_mypy_strict_is_clean() -> None:
    found = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    if found is None:
        pytest.fail("mypy is not installed: it is in the [test] extra of pyproject.toml")
    run_ok([found, "--strict", "--follow-imports=silent", *MYPY_STRICT], cwd=ROOT, timeout=300)
