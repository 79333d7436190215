"""Every generated file in the repository is what scripts/generate.sh makes now.

The script writes its output under a temporary folder (its one argument); each file there
must equal the committed one. A failure names the files: run ``bash scripts/generate.sh``
and commit them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.deploy_manifests import REPO

pytestmark = pytest.mark.live


def test_generated_files_have_not_drifted(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "generate.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert Path("deploy/kubernetes/components/prometheus-operator/prometheusrule.yaml") in (
        generated
    )
    assert len(generated) == 8, generated
    stale = [str(p) for p in generated if (REPO / p).read_bytes() != (tmp_path / p).read_bytes()]
    assert stale == [], f"stale generated files (run `bash scripts/generate.sh`): {stale}"
