"""The architecture stays as drawn: import contracts, and package data that exists once.

The contracts live in ``.importlinter`` (layers fleetwatch | dashboards > exporter |
reactor > common, the reactor's one allowed import from the exporter, the only modules
that may import the kubernetes client, no import cycles, the exporter's pure modules);
``lint-imports`` checks them over every import, including the ones inside functions that
a reading of the top of each file would miss.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "fleetwatch" / "data"


def lint_imports() -> str:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    found = found or shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is not installed: import-linter is in the [test] extra")
    return found


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [lint_imports(), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    # The configuration was read and holds the contracts this module's docstring names.
    words = " ".join(report.split())
    for name in ("Layers:", "kubernetes client", "No import cycles"):
        assert name in words, report
    assert ", 0 broken." in words, report


def shipped_sources() -> set[Path]:
    """The files the package ships, where they live in the repository."""
    return {*(ROOT / "alerts").glob("*.yml"), *(ROOT / "dashboards").glob("*.json")}


def test_package_data_is_a_link_to_each_shipped_file_and_nothing_else() -> None:
    links = [p for p in DATA.rglob("*") if not p.is_dir()]
    assert links, f"{DATA} is empty"
    for link in links:
        assert link.is_symlink(), f"{link.relative_to(ROOT)} is a copy that can drift: link it"
        assert link.resolve().is_file(), f"{link.relative_to(ROOT)} points at nothing"
    assert {link.resolve() for link in links} == {p.resolve() for p in shipped_sources()}


def test_declared_package_data_exists() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = config["tool"]["setuptools"]["package-data"]
    for package, patterns in declared.items():
        for pattern in patterns:
            matches = list((ROOT / package.replace(".", "/")).glob(pattern))
            assert matches, f"package data {package}: {pattern!r} matches no file"
    shipped = {p.resolve() for pattern in declared["fleetwatch"] for p in DATA.parent.glob(pattern)}
    assert shipped == {p.resolve() for p in shipped_sources()}
