"""Smoke run of bench.handshake_floor: openssl's s_time against s_server with the stand-in's
certificates makes handshakes, and both sides' CPU per handshake is a positive number.

Only that it runs; the figures belong in bench/RESULTS.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import handshake_floor
from bench.common import is_number

pytestmark = pytest.mark.live


def test_handshake_floor_runs(tmp_path: Path) -> None:
    out = handshake_floor.main(["--seconds", "1", "--out", str(tmp_path / "h.json")])
    assert out["connections"] > 0
    for key in ("client_cpu_ms", "server_cpu_ms", "fleet_cpu_s"):
        assert is_number(out[key]) and out[key] > 0, key
