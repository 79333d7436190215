"""Metric names are spelled once: in ``fleetwatch.common.metricnames`` (and
``fleetwatch.common.contract``).

The exporter and the reactor write the series, the rules and the dashboards read them;
a name spelled on both sides can drift apart silently (a renamed series leaves a rule
that never fires and a panel that shows "No data"). So no string literal of the product
code outside the two contract modules may hold a ``fleetwatch_*`` name. Docstrings may:
they show samples of what a module exposes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import fleetwatch.common.metricnames as metricnames
from fleetwatch.common import contract

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("fleetwatch", "exporter", "reactor", "alerts", "dashboards")
CONTRACT = {
    ROOT / "fleetwatch" / "common" / "metricnames.py",
    ROOT / "fleetwatch" / "common" / "contract.py",
}
NAME = re.compile(r"\bfleetwatch_[a-z_]+")

#: Literals that are not metric names: (file, name) -> why.
NOT_METRICS = {
    ("reactor/store/postgres.py", "fleetwatch_schema"): "the PostgreSQL table of the version",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (and of any other bare string statement)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def spelled(path: Path) -> set[str]:
    """The ``fleetwatch_*`` names in the string literals of ``path``, docstrings aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        for name in NAME.findall(node.value)
    }


def product_files() -> list[Path]:
    return sorted(p for package in PRODUCT for p in (ROOT / package).rglob("*.py"))


def test_no_metric_name_is_spelled_outside_the_contract() -> None:
    found = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in product_files()
        if path not in CONTRACT
        for name in spelled(path)
    }
    allowed = NOT_METRICS.keys()
    assert sorted(found - allowed) == []
    assert sorted(allowed - found) == []  # an exception no longer needed goes


def test_the_check_sees_a_name_in_a_literal_and_in_an_f_string_not_in_a_docstring(
    tmp_path: Path,
) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        '"""fleetwatch_doc_sample 1"""\n'
        'A = "max(fleetwatch_cluster_info)"\n'
        'B = f"{A}{{fleetwatch_etcd_members}} _fleetwatch_private"\n'
        "# fleetwatch_in_a_comment\n"
    )
    assert spelled(source) == {"fleetwatch_cluster_info", "fleetwatch_etcd_members"}


def _constants(module: object) -> dict[str, str]:
    return {k: v for k, v in vars(module).items() if k.isupper() and isinstance(v, str)}


@pytest.mark.parametrize("module", [metricnames, contract], ids=["metricnames", "contract"])
def test_each_name_of_the_contract_is_defined_once(module: object) -> None:
    values = list(_constants(module).values())
    assert len(values) == len(set(values))


def test_every_metric_name_follows_the_naming_rules() -> None:
    """``fleetwatch_<subsystem>_<name>``, lower case; a counter read as ``_total``."""
    for const, name in _constants(metricnames).items():
        assert re.fullmatch(r"fleetwatch_[a-z]+(_[a-z]+)+", name), const
