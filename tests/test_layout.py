"""The architecture stays as drawn: import contracts, sizes, names, package data once.

The contracts live in ``.importlinter`` (layers fleetwatch.cli > alerts | dashboards >
exporter | reactor > fleetwatch.discovery > fleetwatch.kube > fleetwatch.common, the
stand-ins apart from the product, the only module that may import the kubernetes client,
the text format and the network stack each behind their package, no import cycles, the
pure packages and modules); ``lint-imports`` checks them over every import, including the ones
inside functions that a reading of the top of each file would miss. Modules bounded by
role and one meaning per class name are checked here too: a newcomer reads a module whole,
a role split across two files to fit a line count sends them to both, and a name that
means two things across the product sends them to the wrong file.
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
#: Above this many lines a module says why in its docstring (:data:`LONG_BECAUSE`).
LONG_LINES = 450
#: Above this many lines a module holds more than one role: split it by role.
MAX_LINES = 600
#: The reason a long module gives: a paragraph of its docstring that begins "Long because",
#: with at least a few words of reason.
LONG_BECAUSE = re.compile(r"(?:\A|\n\n)Long because \S+(?: \S+){3,}")


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


def long_modules() -> dict[str, tuple[int, str]]:
    """Every product module above :data:`LONG_LINES`: its length and module docstring."""
    long = {}
    for path in product_modules():  # the stand-ins too: they ship, and people read them
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > LONG_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            long[str(path.relative_to(ROOT))] = (lines, doc)
    return long


def test_a_module_holds_one_role_and_a_long_one_says_why() -> None:
    """A module's boundary is its role, not a line count: one role may take 600 lines, and
    one split to fit a cap sends the reader to two files for one thing. Above 600 a module
    holds more than one role; above 450 its docstring says why its one role is that long,
    in a paragraph of its own that begins "Long because" (what it holds that cannot be
    told apart), so that the next reader weighs the reason instead of the count."""
    long = long_modules()
    over = {name: lines for name, (lines, _) in long.items() if lines > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines: {over}: split by role"
    silent = [
        f"{name} ({lines} lines)"
        for name, (lines, doc) in long.items()
        if not LONG_BECAUSE.search(doc)
    ]
    assert not silent, (
        f"over {LONG_LINES} lines without a paragraph 'Long because ...' in the module "
        f"docstring saying why its one role takes that long: {silent}"
    )


def test_a_module_says_it_is_long_only_while_it_is() -> None:
    """A reason left behind after a module shrank (or written for one that is not long)
    tells the reader to expect something that is not there."""
    long = long_modules()
    stale = [
        str(path.relative_to(ROOT))
        for path in product_modules()
        if str(path.relative_to(ROOT)) not in long
        and LONG_BECAUSE.search(ast.get_docstring(ast.parse(path.read_text())) or "")
    ]
    assert not stale, f"at most {LONG_LINES} lines: drop the 'Long because' paragraph: {stale}"


def test_the_long_because_marker_is_a_paragraph_with_a_reason() -> None:
    assert LONG_BECAUSE.search("What it is.\n\nLong because the grammar is one table: ...")
    assert not LONG_BECAUSE.search("What it is.\n\nLong because.")  # no reason
    assert not LONG_BECAUSE.search("It is not long because of this.")  # not a paragraph


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
