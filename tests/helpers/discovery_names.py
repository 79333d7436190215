"""The names every test of the name rule (``fleetwatch.common.names``) goes through, in one table.

Each bad name carries one character no name may hold, between printable characters, and
the escape ``repr`` shows it with: what a problem, a log line or ``fleetwatch discover``
must print instead of the character.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest


class BadName(NamedTuple):
    name: str
    char: str  #: the one character that makes it bad
    escape: str  #: how a problem shows it


#: (id, bad name): one per kind of character the rule refuses
BAD: list[tuple[str, BadName]] = [
    ("ESC", BadName("prod\x1b[2Jeast", "\x1b", "\\x1b")),
    ("newline", BadName("prod\nts=0 level=error", "\n", "\\n")),
    ("tab", BadName("prod\teast", "\t", "\\t")),
    ("NUL", BadName("prod\x00east", "\x00", "\\x00")),
    ("DEL", BadName("prod\x7feast", "\x7f", "\\x7f")),
    ("C1-CSI", BadName("prod\x9b2Jeast", "\x9b", "\\x9b")),
    ("RLO-bidi", BadName("prod\u202etsae", "\u202e", "\\u202e")),
]
#: the bad names alone
BAD_LIST = [bad for _, bad in BAD]
#: for ``pytest.mark.parametrize("bad", BAD_NAMES)``
BAD_NAMES = [pytest.param(bad, id=name) for name, bad in BAD]
#: the bare characters, for "nothing raw" checks over a whole output
BAD_CHARS = "\x1b\t\x00\x7f\x9b\u202e"
#: names that stay usable: an inner space, letters beyond ASCII, a slash
GOOD_NAMES = ["prod east", "prod-münchen", "team/a", "k8s_ÉTÉ.2"]


def no_raw_control(text: str, *, lines: bool = True) -> None:
    """``text`` carries no control, format or separator character (newlines between lines
    allowed when ``lines``)."""
    found = [c for c in text if not c.isprintable() and not (lines and c == "\n")]
    assert not found, f"raw characters {found!r} in {text!r}"
