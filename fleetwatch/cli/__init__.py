"""The `fleetwatch` command: one entry point, one subcommand per job.

Each subcommand is defined next to the code it runs (``exporter.cli``, ``reactor.cli``,
``fleetwatch.cli.status``, ``fleetwatch.cli.gate``, ``alerts.rules``, ``fleetwatch.cli.demo``):
this module only gathers them, so adding a command means one line in :data:`COMMANDS` and
nothing in the others.

A process imports only the module of the subcommand it runs: ``fleetwatch exporter``
never imports the reactor (pydantic, psycopg: 12 MiB of a process that runs for months),
and the reactor never imports the exporter's server. ``fleetwatch --help`` and a mistyped
subcommand import every module, to list them all.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from fleetwatch.common.flags import old_spellings_used
from fleetwatch.common.logs import setup_logging
from fleetwatch.common.version import version_text

log = logging.getLogger("fleetwatch")


class CommandModule(Protocol):
    """A module that adds its subcommands; each parser it adds sets ``func`` (args -> exit
    code) as its default."""

    def add_parsers(self, subparsers: Any) -> None: ...


def _exporter() -> CommandModule:
    import exporter.cli

    return exporter.cli


def _reactor() -> CommandModule:
    import reactor.cli

    return reactor.cli


def _reactor_client() -> CommandModule:
    import fleetwatch.cli.status

    return fleetwatch.cli.status


def _gate() -> CommandModule:
    import fleetwatch.cli.gate

    return fleetwatch.cli.gate


def _explain() -> CommandModule:
    import fleetwatch.cli.explain

    return fleetwatch.cli.explain


def _rules() -> CommandModule:
    from alerts import rules

    return rules


def _demo() -> CommandModule:
    from fleetwatch.cli import demo

    return demo


#: Each subcommand, and the module that defines it (imported when the subcommand runs).
#: ``tests/test_cli.py`` checks that it names exactly the subcommands the modules add.
COMMANDS: dict[str, Callable[[], CommandModule]] = {
    "exporter": _exporter,
    "discover": _exporter,
    "reactor": _reactor,
    "status": _reactor_client,
    "cluster": _reactor_client,
    "gate": _gate,
    "explain": _explain,
    "rules": _rules,
    "demo": _demo,
}


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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``command``, only the module defining that subcommand is
    imported (its sibling subcommands come with it), else every module."""
    loaders = [COMMANDS[command]] if command in COMMANDS else list(COMMANDS.values())
    modules = [load() for load in dict.fromkeys(loaders)]  # each once, in COMMANDS' order
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
    for module in modules:
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
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_subcommand(args_in))
    args = parser.parse_args(args_in)
    warn_old_spellings(args)
    code: int = args.func(args)
    return code


def warn_old_spellings(args: argparse.Namespace) -> None:
    """One warning per old spelling given (``fleetwatch.common.flags``), in the command's log
    format.

    Logging is set up here in the command's ``--log.format`` (logfmt for commands without
    one), so the line reads like the command's own: ``level=warning msg="--kubeconfig-dir
    is deprecated: ..."``. It is written whatever ``--log.level`` says (``discover`` logs
    errors only by default): a spelling that will go away must not go unseen. The command
    sets up its logging again, at its own level, when it starts.
    """
    used = old_spellings_used(args)
    if not used:
        return
    level = getattr(args, "log_level", "info")
    setup_logging("warn" if level == "error" else level, getattr(args, "log_format", "logfmt"))
    for old, new in used.items():
        log.warning(
            "%s is deprecated: spell it %s (the old spelling still works, and will be "
            "removed in a later release)",
            old,
            new,
        )


def _subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line: its first word that is not an option
    (``fleetwatch`` itself takes no option with a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


if __name__ == "__main__":
    sys.exit(main())
