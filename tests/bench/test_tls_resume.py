"""Smoke run of bench.tls_resume on a few stand-in clusters: it runs and the sessions resume.

Only that it ran and that OpenSSL really resumed every session on the memory-BIO path; its
CPU and memory figures belong in bench/RESULTS.md, not in the test suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import tls_resume
from bench.common import is_number

pytestmark = pytest.mark.live


def test_tls_resume_runs_and_resumes(tmp_path: Path) -> None:
    out = tls_resume.main(["--clusters", "3", "--runs", "1", "--out", str(tmp_path / "t.json")])
    run = out["runs"][0]
    assert run["connections"] == 3
    assert run["reused"] == 3
    for key in ("full_ms", "resumed_ms", "keepalive_get_ms", "kib_per_open_connection"):
        assert is_number(run[key]), key
