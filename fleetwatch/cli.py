"""The `fleetwatch` command: one entry point, one subcommand per job.

Each subcommand is defined next to the code it runs (``exporter.cli``, ``reactor.cli``,
``reactor.client_cli``, ``fleetwatch.rules``, ``fleetwatch.demo``): this module only gathers
them, so adding a command means one line here and nothing in the others.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Protocol

import exporter.cli
import reactor.cli
import reactor.client_cli
from common.version import version_text
from fleetwatch import demo, rules


class CommandModule(Protocol):
    """A module that adds its subcommands; each parser it adds sets ``func`` (args -> exit
    code) as its default."""

    def add_parsers(self, subparsers: Any) -> None: ...


COMMAND_MODULES: tuple[CommandModule, ...] = (
    exporter.cli,
    reactor.cli,
    reactor.client_cli,
    rules,
    demo,
)


class VersionAction(argparse.Action):
    """``--version``: the version line, built only when asked (the revision may run git)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, program: str = "fleetwatch"
    ) -> None:
        super().__init__(
            option_strings,
            argparse.SUPPRESS,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print the version, revision and Python version, then exit",
        )
        self.program = program

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: object,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(version_text(self.program))
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetwatch",
        description=(
            "Watch a fleet of Kubernetes clusters: probe every API server named in your "
            "kubeconfigs, publish the results to Prometheus, and degrade or restore the "
            "apps on a cluster when Alertmanager says it went down or came back."
        ),
    )
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.add_parsers(subparsers)
    # `fleetwatch exporter --version` as `prometheus --version`: on every subcommand,
    # nested ones (`fleetwatch cluster delete`, `fleetwatch demo down`) included.
    for name, sub in subparsers.choices.items():
        _add_version(sub, f"fleetwatch {name}")
    return parser


def _add_version(parser: argparse.ArgumentParser, program: str) -> None:
    parser.add_argument("--version", action=VersionAction, program=program)
    for action in parser._actions:  # argparse has no public way to list subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _add_version(sub, f"{program} {name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
