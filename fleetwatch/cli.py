"""The `fleetwatch` command: one entry point, one subcommand per job.

Each subcommand is defined next to the code it runs (``exporter.cli``, ``reactor.cli``,
``fleetwatch.rules``, ``fleetwatch.demo``): this module only gathers them, so adding a
command means one line here and nothing in the others.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Protocol

import exporter.cli
import reactor.cli
from common.version import __version__
from fleetwatch import demo, rules


class CommandModule(Protocol):
    """A module that adds its subcommands; each parser it adds sets ``func`` (args -> exit
    code) as its default."""

    def add_parsers(self, subparsers: Any) -> None: ...


COMMAND_MODULES: tuple[CommandModule, ...] = (exporter.cli, reactor.cli, rules, demo)


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
    for module in COMMAND_MODULES:
        module.add_parsers(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
