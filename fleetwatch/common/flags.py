"""Old spellings of flags: still accepted, hidden from ``--help``, each named in one warning.

fleetwatch spells its flags as Prometheus' components do, ``--<area>.<name>``: dotted, a
hyphen only inside a word (``--web.listen-address``, ``--kubeconfig.dir``,
``--failure.threshold``). Flags first spelled otherwise (``--kubeconfig-dir``,
``--failure-threshold``, ``--token-file``) keep working, so that a script, a unit file or a
manifest written for an older release does not break on an upgrade: each is a hidden
alias (``argparse.SUPPRESS``) that stores exactly what its flag stores, through the flag's
own action, and is remembered on the parsed namespace. The command then says once, after
its logging is set up (``--log.level`` and ``--log.format`` may come later on the command
line than the old spelling), which spelling replaces it: :func:`old_spellings_used`.

``tests/test_operating_surface.py`` walks every subcommand: no flag shown by ``--help`` is
spelled the old way, and every alias stores what its flag stores.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

#: The attribute of the parsed namespace listing the old spellings given: {old: new}.
USED: str = "old_spellings_used"


class OldSpelling(argparse.Action):
    """A hidden alias of ``target`` (the flag spelled ``new``): it takes the values the flag
    takes, hands them to the flag's own action, and records that ``old`` was used."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        target: argparse.Action,
        new: str,
        **_: Any,
    ) -> None:
        super().__init__(
            option_strings,
            dest=target.dest,
            nargs=target.nargs,
            const=target.const,
            default=argparse.SUPPRESS,  # the flag's own default stands
            type=None if isinstance(target.type, str) else target.type,  # str: a registry name
            choices=target.choices,
            required=False,
            help=argparse.SUPPRESS,
            metavar=target.metavar,
        )
        self.target = target
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        self.target(parser, namespace, values, self.new)
        used: dict[str, str] = dict(getattr(namespace, USED, {}))
        used.setdefault(option_string or self.option_strings[0], self.new)
        setattr(namespace, USED, used)


def add_old_spelling(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept ``old`` on ``parser`` as a hidden alias of its flag ``new`` (already added)."""
    target = parser._option_string_actions[new]  # argparse has no public look-up by flag
    parser.add_argument(old, action=OldSpelling, target=target, new=new)


def old_spellings_used(args: argparse.Namespace) -> dict[str, str]:
    """The old spellings given on the command line, each once: {old: the flag's spelling}."""
    used: dict[str, str] = getattr(args, USED, {})
    return dict(used)


def old_spellings(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every old spelling ``parser`` itself accepts (not its subcommands'): {old: new}."""
    return {
        option: action.new
        for action in parser._actions
        if isinstance(action, OldSpelling)
        for option in action.option_strings
    }
