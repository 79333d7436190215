"""The `fleetwatch` command: one entry point, one subcommand per job.

Each subcommand is defined next to the code it runs (``exporter.cli``, ``reactor.cli``,
``fleetwatch.rules``, ``fleetwatch.demo``): this module only gathers them, so adding a
command never means editing the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from fleetwatch import __version__

#: Modules that each expose ``add_parsers(subparsers)``; every parser they add sets
#: ``func`` (``args -> exit code``) as its default.
COMMAND_MODULES = (
    "exporter.cli",
    "reactor.cli",
    "fleetwatch.rules",
    "fleetwatch.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetwatch",
        description=(
            "Watch a fleet of Kubernetes clusters: probe every API server named in your "
            "kubeconfigs, publish the results to Prometheus, and degrade or restore the "
            "apps on a cluster when Alertmanager says it went down or came back."
        ),
    )
    parser.add_argument("--version", action="version", version=f"fleetwatch {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parsers(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
