"""Write the three dashboards' JSON next to this package, or check that it is up to date.

    python -m dashboards           # rewrite the JSON files
    python -m dashboards --check   # exit 1 if a committed file differs

Run from the checkout's root (the generator is not part of the installed package; the
JSON it writes is what users import).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from dashboards.cluster_detail import cluster_detail
from dashboards.fleet_overview import fleet_overview
from dashboards.panels import Json
from dashboards.reactor import reactor

#: The folder the JSON files are committed in.
HERE = Path(__file__).resolve().parent

FILES: dict[str, Callable[[], Json]] = {
    "fleet-overview.json": fleet_overview,
    "cluster-detail.json": cluster_detail,
    "reactor.json": reactor,
}


def render() -> Iterator[tuple[str, str]]:
    """(file name, JSON text) for every dashboard, exactly as committed."""
    for name, build in FILES.items():
        yield name, json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dashboards", description="Write fleetwatch's Grafana dashboards."
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs")
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write to")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date, run python -m dashboards: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0
