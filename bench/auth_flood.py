"""How long a scrape with the right password takes while a flood of wrong ones comes.

``common.basicauth`` remembers the pairs that passed apart from those that failed, and
lets at most 8 checks wait: before that, 40 threads of wrong passwords made each correct
scrape wait 2.8-3.0 s behind the flood's bcrypt checks (150 threads: 10 s). The test
(``tests/test_operating_surface_webguard.py``) asserts the mechanism by counting bcrypt
checks; this is where the time is measured, since a wall-clock bound in a test fails on a
loaded machine (a median of 0.119 s against the test's old 0.1 s bound, at load 5-9).

The exporter's application in process, plain HTTP on 127.0.0.1, ``basic_auth_users`` with
a bcrypt hash of cost 6 (a few milliseconds a check: the flood fills the 100 remembered
wrong pairs in about a second); ``--threads`` threads each send wrong passwords, never the
same twice; between two scrapes, ``--between`` wrong pairs are sent (more than the 100
remembered, as between two scrapes of a real Prometheus). Reported: each scrape's seconds,
their median, min and max, and the machine's load meanwhile.

Run: ``.venv/bin/python -m bench.auth_flood --threads 40 --scrapes 10``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import bcrypt
from aiohttp import web

from bench.common import machine_load, summary, write_result
from exporter.server import create_app
from exporter.settings import ExporterSettings
from fleetwatch.common.webconfig import parse_web_config
from fleetwatch.procs import free_port

PASSWORD = "scrape-s3cret"


def _get(url: str, password: str) -> int:
    raw = base64.b64encode(f"prometheus:{password}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {raw}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


async def measure(threads: int, scrapes: int, between: int) -> dict[str, Any]:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(6)).decode()
    config = parse_web_config(f"basic_auth_users: {{prometheus: '{hashed}'}}\n", base=Path("."))
    app = create_app(ExporterSettings(interval=60, timeout=2), run_loop=False, web_config=config)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}/metrics"
    stop = threading.Event()
    sent = [0] * threads

    def flood(n: int) -> None:
        while not stop.is_set():
            _get(url, f"wrong-{n}-{sent[n]}")
            sent[n] += 1

    def scrape() -> float:
        started = time.perf_counter()
        status = _get(url, PASSWORD)
        if status != 200:
            raise RuntimeError(f"the right password was answered {status}")
        return time.perf_counter() - started

    workers = [threading.Thread(target=flood, args=(n,), daemon=True) for n in range(threads)]
    took: list[float] = []
    try:
        await asyncio.to_thread(scrape)  # checked once, remembered from now on
        for worker in workers:
            worker.start()
        with machine_load() as load:
            for _ in range(scrapes):
                goal, deadline = sum(sent) + between, time.monotonic() + 120
                while sum(sent) < goal:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the flood stalled")
                    await asyncio.sleep(0.02)
                took.append(await asyncio.to_thread(scrape))
    finally:
        stop.set()
        for worker in workers:  # joined off the loop: their last requests need it
            await asyncio.to_thread(worker.join, 30)
        await runner.cleanup()
    return {
        "threads": threads,
        "between": between,
        "wrong_sent": sum(sent),
        "scrape_seconds": summary(took),
        "scrapes": [round(t, 4) for t in took],
        "load": load,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=40, help="threads of wrong passwords")
    parser.add_argument("--scrapes", type=int, default=10)
    parser.add_argument("--between", type=int, default=150, help="wrong pairs between scrapes")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.threads, args.scrapes, args.between))
    write_result("auth_flood", result, args.out)
    return result


if __name__ == "__main__":
    main()
