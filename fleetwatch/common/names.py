"""What may name a cluster, a context, an app or a CD object, and how any name is shown.

A name travels far from where someone wrote it. A kubeconfig context or an Argo CD
Secret's ``name`` key becomes a Prometheus label value, the ``cluster`` label of an alert,
a row of the reactor's store, a cell of ``fleetwatch discover``'s table on someone's
terminal, a word of every log line about that cluster. A name holding an ESC rewrites
the terminal that prints it (colours, its title, a cleared screen, a fake prompt); a
newline forges a log line or a table row. So every place that takes a name from outside
(discovery's kubeconfig files and Secrets, the reactor's API and webhooks, the CD
mirror) asks :func:`name_problem`, and turns a name it refuses into a problem that shows
the name escaped by :func:`shown`, never raw.

**The rule**: 1 to :data:`MAX_NAME` characters, no space at either end, every character
printable as Python's ``str.isprintable`` says (:func:`printable_char`). That refuses
every character of the Unicode categories

- ``Cc``, the controls: C0 (NUL, tab, newline, ESC ...), DEL and C1 (0x80 to 0x9f; 0x9b
  is the one-character CSI that some terminals obey like ESC ``[``);
- ``Cf``, the format characters: bidi overrides and isolates (U+202A to U+202E, U+2066
  to U+2069) make a name read as another one (the "Trojan Source" trick, CVE-2021-42574);
  zero-width spaces and joiners, the soft hyphen and the BOM are invisible, so
  ``prod`` and ``pro<U+200B>d`` look alike in an alert and a person acts on the wrong
  cluster. Emoji sequences (joined by U+200D) are refused with them, a small price for
  names of infrastructure;
- ``Zs`` but the space (the no-break and ideographic spaces look like a space and are
  not one), ``Zl`` and ``Zp`` (U+2028 and U+2029 break lines in browsers, editors and
  log viewers);
- ``Cs``, lone surrogates (what Python makes of a file name's bytes that are not UTF-8):
  no UTF-8 can carry them, so no label, log line or JSON answer could;
- ``Co`` and ``Cn``, private-use and unassigned code points: no agreed glyph, nothing a
  reader can check.

Inner spaces are allowed: kubeconfig context names have them (``prod east``). The length
and the ends are the reactor API's rule for a name (``reactor.fields``): a cluster
discovery published under a name the reactor refuses would fire alerts the reactor skips,
an outage that never pauses anything. One rule, so both ends of the pipeline agree.

**Shown**: ``repr``'s escapes (``\\x1b``, ``\\n``, ``\\u202e``), since ``repr`` escapes
exactly the characters ``str.isprintable`` refuses: a name the rule accepts shows as it
is, one it refuses shows every offending character as an escape and nothing raw.
"""

from __future__ import annotations

import unicodedata
from typing import Final

#: Kubernetes' longest object name (a DNS subdomain), and the reactor API's for a name.
MAX_NAME: Final = 253
#: The rule in words, for the end of a problem.
RULE: Final = f"a name is 1 to {MAX_NAME} printable characters, no space at either end"


def printable_char(char: str) -> bool:
    """Whether one character may be part of a name (the space included; see the module)."""
    return char.isprintable()


def printable(text: str) -> bool:
    """Whether every character of ``text`` is :func:`printable_char` (one C loop)."""
    return text.isprintable()


def name_flaw(name: object) -> str | None:
    """What is wrong with ``name`` as a name, in the words that follow it in a sentence
    (``has U+001B (a control character, Cc) at position 2``); None when nothing is.

    The first offending character is named by code point and category, never printed.
    """
    if not isinstance(name, str):
        return "is not a string"
    if not name:
        return "is empty"
    if len(name) > MAX_NAME:
        return f"has {len(name)} characters, over {MAX_NAME}"
    unprintable = char_flaw(name)
    if unprintable is not None:
        return unprintable
    if name[0] == " " or name[-1] == " ":
        return "starts or ends with a space"
    return None


def char_flaw(text: str, what: str = "") -> str | None:
    """The first character of ``text`` a name may not hold, as ``has U+001B (a control
    character, Cc) at position 2`` (after ``what`` and a space, given one); None when there
    is none. For texts that are not names but are shown as they are (a server URL: the
    ``endpoint`` label), named by code point so that the text itself, which may carry a
    secret, need not be shown."""
    if printable(text):
        return None
    index, char = next((i, c) for i, c in enumerate(text) if not printable_char(c))
    flaw = f"has {describe(char)} at position {index + 1}"
    return f"{what} {flaw}" if what else flaw


def name_problem(name: object, what: str = "name", *, show: bool = True) -> str | None:
    """Why ``name`` cannot name a cluster, a context or an app, as a sentence; None when it
    can. ``show``: the sentence shows the name escaped (``name 'a\\x1b[2J' has U+001B (a
    control character, Cc) at position 2: a name is ...``); without it, for a problem whose
    context already shows the name, only ``what`` (``context name has U+001B ...``)."""
    flaw = name_flaw(name)
    if flaw is None:
        return None
    if not show or not isinstance(name, str):
        return f"{what} {flaw}: {RULE}"
    clipped = shown(name) if len(name) <= 80 else shown(name[:80]) + "..."
    return f"{what} {clipped} {flaw}: {RULE}"


def is_name(name: object) -> bool:
    """Whether ``name`` may name a cluster, a context or an app (:func:`name_flaw`)."""
    return name_flaw(name) is None


def shown(text: str) -> str:
    """``text`` quoted, every character a name may not hold escaped: safe on a terminal and
    in a log line, and unambiguous (``repr``: ``'a\\x1bb'``)."""
    return repr(text)


def escaped(text: str) -> str:
    """``text`` with every character a name may not hold escaped, without quotes: for a
    table cell or a field whose reader expects the bare text (a path, a source)."""
    if printable(text):
        return text
    return "".join(c if printable_char(c) and c != "\\" else _escape(c) for c in text)


def _escape(char: str) -> str:
    if char == "\\":
        return "\\\\"
    return repr(char)[1:-1]


_CATEGORY_WORDS: Final = {
    "Cc": "a control character",
    "Cf": "a format character",
    "Cs": "a lone surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zs": "a space other than U+0020",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def describe(char: str) -> str:
    """``U+001B (a control character, Cc)``: a character named without printing it."""
    category = unicodedata.category(char)
    words = _CATEGORY_WORDS.get(category, "a character")
    return f"U+{ord(char):04X} ({words}, {category})"
