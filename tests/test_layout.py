"""The architecture stays the way docs/ARCHITECTURE.md draws it.

Dependencies run one way (fleetwatch -> exporter, reactor; reactor -> exporter.discovery),
and only the two modules that load kubeconfigs import the synchronous kubernetes client,
so nobody calls it from the event loop by accident.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES_IMPORTERS = {"exporter/discovery.py", "exporter/credentials.py"}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["exporter", "reactor", "fleetwatch"])
def test_only_the_kubeconfig_modules_import_the_kubernetes_client(package: str) -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in modules(package)
        if any(name == "kubernetes" or name.startswith("kubernetes.") for name in imports_of(path))
        and str(path.relative_to(ROOT)) not in KUBERNETES_IMPORTERS
    ]
    # The stand-in writes kubeconfigs for the client but must not need it to serve.
    offenders = [p for p in offenders if not p.startswith("fleetwatch/standin/")]
    assert offenders == []


def test_exporter_depends_on_neither_the_reactor_nor_the_product_face() -> None:
    for path in modules("exporter"):
        bad = {n for n in imports_of(path) if n.split(".")[0] in {"reactor", "fleetwatch"}}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_reactor_uses_only_discovery_from_the_exporter() -> None:
    for path in modules("reactor"):
        names = imports_of(path)
        exporter = {n for n in names if n.split(".")[0] == "exporter"}
        assert exporter <= {"exporter.discovery"}, f"{path.relative_to(ROOT)}: {sorted(exporter)}"
        face = {n for n in names if n.startswith("fleetwatch.")}
        assert not face, f"{path.relative_to(ROOT)} imports {sorted(face)}"
