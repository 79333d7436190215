"""``fleetwatch exporter --config.file F --config.check``: validates, says why, and exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from exporter.configfile import load_config
from exporter.controlplane.check import ControlPlaneCheck, build_checks


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetwatch.cli", "exporter", "--config.check",
         "--config.file", str(path), "--kubeconfig", str(path.parent / "none")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.live
def test_config_check_accepts_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "fleetwatch.yml"
    path.write_text("clusters:\n  prod:\n    etcd:\n      endpoints: [http://127.0.0.1:2379]\n")
    result = check(path)
    assert result.returncode == 0, result.stderr
    assert f"{path}: OK" in result.stdout


@pytest.mark.live
def test_config_check_names_the_unknown_key(tmp_path: Path) -> None:
    path = tmp_path / "fleetwatch.yml"
    path.write_text("clusters:\n  prod:\n    etcd:\n      endpoint: [http://127.0.0.1:2379]\n")
    result = check(path)
    assert result.returncode == 1
    assert (
        f"{path}: clusters.prod.etcd: unknown key 'endpoint' (allowed: endpoints, ca_file,"
        " cert_file, key_file, timeout_seconds)"
    ) in result.stderr


def test_build_checks_runs_the_control_plane_check_with_or_without_a_file(tmp_path: Path) -> None:
    (without,) = build_checks(None)
    assert isinstance(without, ControlPlaneCheck)
    assert without.config.clusters == {}
    path = tmp_path / "fleetwatch.yml"
    path.write_text("clusters: {prod: {etcd: {endpoints: ['http://127.0.0.1:2379']}}}\n")
    (with_file,) = build_checks(load_config(path))
    assert isinstance(with_file, ControlPlaneCheck)
    assert with_file.config.etcd_for("prod") is not None
