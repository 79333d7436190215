"""Measuring tools shared by the benchmarks: process CPU/RSS, machine load, wrk, results.

The machine is shared and noisy, so every benchmark runs its peer in the same run and
reports medians and ratios; this module gives them one way to read a process's CPU
seconds and memory from /proc, one way to record how loaded the machine was, and one
way to drive and parse ``wrk``.
"""

from __future__ import annotations

import io
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "bench" / "out"
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- one process: CPU seconds and memory -------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / _CLK_TCK


def children_cpu_seconds(pid: int) -> float:
    """:func:`cpu_seconds` of ``pid``'s live child processes (the reactor's discovery
    process), from ``/proc/PID/task/*/children``."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue  # the thread ended meanwhile
        for child in children:
            try:
                total += cpu_seconds(int(child))
            except (OSError, ValueError):
                continue  # the child ended meanwhile
    return total


def cpu_seconds_fine(pid: int) -> float:
    """CPU seconds of ``pid``'s live threads, to the nanosecond (``/proc/PID/task/*/schedstat``).

    ``cpu_seconds`` counts in clock ticks (10 ms): too coarse for a process that is idle
    for a minute. A thread that ended between two reads takes its time with it, so use
    this over windows where the process starts no threads and ends none.
    """
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile
    return total / 1e9


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` (now) and ``VmHWM`` (peak resident) of ``pid``, in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


@dataclass
class ProcSample:
    """What one process spent between ``start()`` and ``stop()``."""

    pid: int
    cpu_s: float = 0.0
    wall_s: float = 0.0
    rss_peak_mib: float = 0.0
    rss_end_mib: float = 0.0


class ProcWatch:
    """CPU seconds of a process over a window, and its peak RSS (from VmHWM and sampling).

    VmHWM is the kernel's own high-water mark, so short peaks between samples are not
    missed; the sampling thread only adds the resident size at the end.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._cpu0 = 0.0
        self._t0 = 0.0

    def start(self) -> ProcWatch:
        self._cpu0 = cpu_seconds(self.pid)
        self._t0 = time.perf_counter()
        return self

    def stop(self) -> ProcSample:
        cpu = cpu_seconds(self.pid) - self._cpu0
        wall = time.perf_counter() - self._t0
        mem = memory_kib(self.pid)
        return ProcSample(
            pid=self.pid,
            cpu_s=cpu,
            wall_s=wall,
            rss_peak_mib=mem.get("VmHWM", 0) / 1024,
            rss_end_mib=mem.get("VmRSS", 0) / 1024,
        )


# --- the whole machine: how loaded was it ---------------------------------------------


def _cpu_jiffies() -> tuple[int, int]:
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]  # idle + iowait
    return sum(parts), idle


@dataclass
class LoadSample:
    """Machine load over a window: load averages at the end, busy share of all cores."""

    loadavg_1m: float
    busy_cores: float  # average number of busy cores over the window (of nproc)
    nproc: int


class MachineLoad:
    def __init__(self) -> None:
        self._j0 = _cpu_jiffies()

    def stop(self) -> LoadSample:
        total0, idle0 = self._j0
        total1, idle1 = _cpu_jiffies()
        dt = max(total1 - total0, 1)
        busy = 1.0 - (idle1 - idle0) / dt
        n = os.cpu_count() or 1
        return LoadSample(loadavg_1m=os.getloadavg()[0], busy_cores=round(busy * n, 2), nproc=n)


@contextmanager
def machine_load() -> Iterator[dict[str, Any]]:
    """``with machine_load() as load:`` fills ``load`` with a LoadSample dict at exit."""
    box: dict[str, Any] = {}
    m = MachineLoad()
    try:
        yield box
    finally:
        box.update(asdict(m.stop()))


@contextmanager
def busy_processes(count: int, nice: int = 0) -> Iterator[list[int]]:
    """``count`` processes spinning on the CPU meanwhile (a loaded machine), then stopped.

    Each is a Python busy loop of its own, at ``nice`` (19: it gets a core only when
    nothing else wants one, so what it still costs the measured server is the machine's,
    not the scheduler's), stopped by its pid at exit; with 0, nothing.
    """
    spin = f"import os\nos.nice({nice})\nwhile True: pass"
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=10)


def machine_info() -> dict[str, Any]:
    """nproc, memory, Python and library versions: the header of every result file."""
    from importlib.metadata import version

    import aiohttp

    mem_total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_total = int(line.split()[1])
    cpu_model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model,
        "mem_total_gib": round(mem_total / 1024 / 1024, 1),
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "prometheus_client": version("prometheus-client"),
        "kernel": platform.release(),
        "loadavg_at_start": os.getloadavg(),
        "code": code_version(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def code_version() -> dict[str, str]:
    """The commit and the uncommitted changes the run used (the tree changes under us)."""

    def git(*args: str) -> str:
        try:
            out = subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return "?"
        return out.stdout.strip()

    return {
        "head": git("log", "-1", "--format=%h %ad", "--date=format:%H:%M:%S"),
        "exporter": git("log", "-1", "--format=%h", "--", "exporter/"),
        "reactor": git("log", "-1", "--format=%h", "--", "reactor/"),
        "standin": git("log", "-1", "--format=%h", "--", "fleetwatch/standin/"),
        "uncommitted": " ".join(
            git("status", "--short", "--", "exporter/", "reactor/", "fleetwatch/").split()
        ),
    }


# --- wrk ---------------------------------------------------------------------------------

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not m:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


@dataclass
class WrkResult:
    requests: int
    duration_s: float
    rps: float
    p50_ms: float
    p75_ms: float
    p90_ms: float
    p99_ms: float
    non_2xx: int = 0
    socket_errors: dict[str, int] = field(default_factory=dict)


def parse_wrk(text: str) -> WrkResult:
    """Parse ``wrk --latency`` output (its latency distribution and totals)."""
    pct: dict[str, float] = {}
    for m in re.finditer(r"^\s+(50|75|90|99)%\s+(\S+)\s*$", text, re.M):
        pct[m.group(1)] = _ms(m.group(2))
    total = re.search(r"(\d+) requests in ([\d.]+\w+),", text)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not (total and rps and len(pct) == 4):
        raise ValueError(f"could not parse wrk output:\n{text}")
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    errors = (
        dict(zip(("connect", "read", "write", "timeout"), map(int, sock.groups()), strict=True))
        if sock
        else {}
    )
    return WrkResult(
        requests=int(total.group(1)),
        duration_s=_ms(total.group(2)) / 1000,
        rps=float(rps.group(1)),
        p50_ms=pct["50"],
        p75_ms=pct["75"],
        p90_ms=pct["90"],
        p99_ms=pct["99"],
        non_2xx=int(non2xx.group(1)) if non2xx else 0,
        socket_errors=errors,
    )


def post_lua(path: Path, body: bytes, headers: dict[str, str]) -> Path:
    """Write a wrk Lua script that sends ``body`` as a POST with ``headers``."""
    lines = ['wrk.method = "POST"', f"wrk.body = {_lua_str(body.decode())}"]
    for k, v in headers.items():
        lines.append(f"wrk.headers[{_lua_str(k)}] = {_lua_str(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _lua_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def run_wrk(
    url: str,
    duration_s: float,
    threads: int = 2,
    connections: int = 50,
    script: Path | None = None,
) -> WrkResult:
    """Run wrk against a loopback URL for a bounded time and parse its output."""
    assert url.startswith("http://127.0.0.1:"), "benchmarks talk to loopback only"
    argv = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(duration_s))}s",
        "--timeout",
        "5s",
        "--latency",
    ]
    if script is not None:
        argv += ["-s", str(script)]
    argv.append(url)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=duration_s + 30, check=True)
    return parse_wrk(out.stdout)


# --- summaries and result files ----------------------------------------------------------


def is_number(value: object) -> bool:
    """A real, finite number (what every benchmark figure must be)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of several runs (what RESULTS.md reports)."""
    if not values:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {
        "median": round(median(values), 6),
        "min": round(min(values), 6),
        "max": round(max(values), 6),
        "n": len(values),
    }


def write_result(name: str, data: dict[str, Any], out: Path | None = None) -> Path:
    """Write ``data`` (plus the machine header) as JSON and print it; return the path."""
    path = out or OUT_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": name, "machine": machine_info(), "command": sys.argv, **data}
    path.write_text(json.dumps(doc, indent=2, default=_jsonable) + "\n")
    print(json.dumps(doc, indent=2, default=_jsonable))
    return path


def _jsonable(obj: object) -> object:
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)  # type: ignore[call-overload]
    raise TypeError(f"not JSON: {type(obj)}")


class Sampler(threading.Thread):
    """Samples a process's RSS every ``interval`` seconds (for peaks VmHWM cannot split)."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True, name=f"rss-sampler-{pid}")
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_kib = max(self.peak_kib, memory_kib(self.pid).get("VmRSS", 0))
            except OSError:
                return
            self._stop.wait(self.interval)

    def stop(self) -> float:
        self._stop.set()
        self.join(timeout=2)
        return self.peak_kib / 1024


# --- another commit's code ----------------------------------------------------------


def export_tree(commit: str, directory: Path) -> Path:
    """The product packages of ``commit`` unpacked in ``directory`` (``git archive``; nothing
    in the repository changes): a baseline run with ``PYTHONPATH`` on ``directory``."""
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", commit],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    packages = [
        name for name in ("exporter", "discovery", "common", "fleetwatch") if name in listed
    ]
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, *packages],
        cwd=REPO, capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(directory, filter="data")
    return directory
