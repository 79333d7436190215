"""The architecture stays as drawn: import contracts, sizes, names, package data once.

The contracts live in ``.importlinter`` (layers fleetwatch.cli > alerts | dashboards >
exporter | reactor > fleetwatch.discovery > fleetwatch.kube > fleetwatch.common, the
stand-ins apart from the product, the only module that may import the kubernetes client,
the text format and the network stack each behind their package, no import cycles, the
pure packages and modules); ``lint-imports`` checks them over every import, including the ones
inside functions that a reading of the top of each file would miss. Small modules with
one meaning per class name are checked here too: a newcomer reads a module whole, and a
name that means two things across the product sends them to the wrong file.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "fleetwatch" / "data"
PRODUCT = ("fleetwatch", "exporter", "reactor", "alerts", "dashboards")
#: The stand-in API servers are test equipment that ships for the demo: exempt from sizes.
STANDIN = ROOT / "fleetwatch" / "standin"
MAX_LINES = 450
MAX_OVER = 2


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
    for name in ("Layers:", "kubernetes client", "No import cycles", "independent oracles"):
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


def product_modules() -> list[Path]:
    return sorted(p for package in PRODUCT for p in (ROOT / package).rglob("*.py"))


def test_at_most_two_product_modules_are_long_and_each_says_why() -> None:
    long = {}
    for path in product_modules():
        if STANDIN in path.parents:
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            long[str(path.relative_to(ROOT))] = lines
    assert len(long) <= MAX_OVER, f"over {MAX_LINES} lines: {long}: split by role"
    for name in long:
        doc = ast.get_docstring(ast.parse((ROOT / name).read_text())) or ""
        assert re.search(r"\d+ lines", doc), f"{name}: its docstring must say why it is long"


def test_no_two_product_classes_share_a_name() -> None:
    where: dict[str, list[str]] = {}
    for path in product_modules():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    shared = {name: files for name, files in where.items() if len(files) > 1}
    assert not shared, f"one meaning per name; rename each by its role: {shared}"


def test_product_comments_tell_no_history() -> None:
    """Issue numbers and benchmark rounds belong in bench/RESULTS.md and docs/."""
    history = re.compile(r"\b(?:[Rr]ound [0-9]|issue [0-9]|issue #[0-9])")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in product_modules()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if history.search(line)
    ]
    assert not found, found
