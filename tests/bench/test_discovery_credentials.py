"""Smoke run of bench.discovery_credentials on a handful of contexts: it runs, gives numbers.

Only that every case ran end to end (imports, an idle exporter, discovery and credentials
of each layout and material); its figures belong in bench/RESULTS.md, not in the suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import discovery_credentials
from bench.common import is_number

pytestmark = pytest.mark.live


def test_discovery_credentials_runs(tmp_path: Path) -> None:
    out = discovery_credentials.main(["--contexts", "3", "--out", str(tmp_path / "d.json")])
    assert is_number(out["imports"]["rss"]["fleetwatch.cli"]["rss_mib"])
    assert is_number(out["idle"]["rss_mib"]) and out["idle"]["ready_s"] > 0
    cases = {(c["layout"], c["material"]): c for c in out["contexts"]}
    assert set(cases) == {
        (lay, mat) for lay in ("files", "folder") for mat in ("shared", "distinct")
    }
    for case in cases.values():
        assert case["scan"]["parses"] == case["files"]
        assert case["rescan_unchanged"]["parses"] == case["files"]  # unchanged: not parsed
        assert case["resolve"]["failed"] == 0 and case["re_resolve_after_401"]["failed"] == 0
        assert case["re_resolve_after_401"]["parses_during"] == 0
        for key in ("cpu_s", "kept_bytes_per_context", "peak_above_before_mib"):
            assert is_number(case["scan"][key]) and is_number(case["resolve"][key]), key
    assert cases[("files", "distinct")]["resolve"]["ssl_contexts"] == 3
