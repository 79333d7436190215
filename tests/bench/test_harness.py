"""The harness pieces: wrk parsing, /proc readings, the bare aiohttp and generate_latest peers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import genlatest
from bench.common import cpu_seconds, is_number, memory_kib, parse_wrk

# Real `wrk --latency` output from this machine (trimmed of nothing).
WRK_OUTPUT = """Running 1s test @ http://127.0.0.1:41231/hello
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.63ms  361.31us   9.05ms   91.94%
    Req/Sec    15.44k     1.06k   16.47k    75.00%
  Latency Distribution
     50%    1.57ms
     75%    1.66ms
     90%    1.86ms
     99%    3.02ms
  30722 requests in 1.00s, 4.66MB read
  Non-2xx or 3xx responses: 3
  Socket errors: connect 0, read 1, write 0, timeout 2
Requests/sec:  30601.10
Transfer/sec:      4.64MB
"""


def test_parse_wrk_reads_distribution_totals_and_errors() -> None:
    r = parse_wrk(WRK_OUTPUT)
    assert (r.requests, r.rps, r.non_2xx) == (30722, 30601.10, 3)
    assert (r.p50_ms, r.p99_ms) == (1.57, 3.02)
    assert r.socket_errors == {"connect": 0, "read": 1, "write": 0, "timeout": 2}


def test_parse_wrk_converts_units_to_milliseconds() -> None:
    text = WRK_OUTPUT.replace("99%    3.02ms", "99%    1.20s").replace(
        "50%    1.57ms", "50%  850.00us"
    )
    r = parse_wrk(text)
    assert (r.p50_ms, r.p99_ms) == (0.85, 1200.0)


def test_parse_wrk_rejects_output_without_a_distribution() -> None:
    with pytest.raises(ValueError, match="could not parse"):
        parse_wrk("Running 1s test\nRequests/sec: 10\n")


def test_proc_readings_of_this_process() -> None:
    assert cpu_seconds(os.getpid()) > 0
    mem = memory_kib(os.getpid())
    assert mem["VmHWM"] >= mem["VmRSS"] > 0


def test_genlatest_runs(tmp_path: Path) -> None:
    result = genlatest.main(["--series", "100", "--runs", "2", "--out", str(tmp_path / "g.json")])
    for kind in ("collector", "gauges"):
        assert is_number(result[f"100/{kind}"]["seconds"]["median"])
        assert result[f"100/{kind}"]["bytes"] > 100 * 30
