"""What a field of a reactor API body may hold: names, texts, endpoints and timestamps.

The rules that cannot be said with a JSON Schema keyword alone are regular expressions
here, and the server checks values with the very pattern the OpenAPI document carries
(``reactor.api.openapi`` names each one once):

- a name (cluster, app) is 1 to 253 printable characters without a space at either end:
  ``fleetwatch.common.names``' rule, the one discovery applies to the names it publishes, so the
  reactor never refuses a name the exporter's alerts carry (:data:`NAME_PATTERN` is built
  from ``fleetwatch.common.names.printable_char`` over every code point, so a client sees the exact
  set);
- a text (``kubeconfig_secret_ref``, a ``reason``) is 1 to 4096 printable characters, not
  only spaces;
- an endpoint is an http(s) URL with a host name, an IPv4 or an IPv6 address, and a port
  from 0 to 65535 when it has one;
- a webhook's timestamps are ASCII RFC 3339 with a real month, day, hour, minute and second.

Each field type (:data:`Name`, :data:`Text`, :data:`Endpoint`, :data:`Timestamp`,
:data:`Start`) carries its pattern for the document and its check for the server; a check
raises :class:`Problem` with the words that follow the field's name in a 400.
"""

from __future__ import annotations

import re
import sys
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field

from fleetwatch.common.names import MAX_NAME, name_flaw, printable_char

MAX_TEXT = 4096


# -- the patterns ------------------------------------------------------------------------


def _printable_class() -> str:
    """The characters a name may hold but the space, as the inside of a class.

    A positive class, not "anything but the unprintable": generators (schemathesis,
    Hypothesis) draw from its ranges quickly, and slowly from a negated class of the same
    size. Literal characters, not escapes, so Python's ``re``, ECMAScript's (with the
    ``u`` flag) and Rust's read it alike.
    """
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if code != 0x20 and printable_char(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])

    def char(code: int) -> str:
        return "\\" + chr(code) if chr(code) in "\\]^-[" else chr(code)

    return "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in ranges)


_P = _printable_class()

#: 1+ printable characters, none a space at either end (the length is maxLength's).
NAME_PATTERN = f"^[{_P}](?:[{_P} ]*[{_P}])?$"
#: printable characters, at least one not a space.
TEXT_PATTERN = f"^[{_P} ]*[{_P}][{_P} ]*$"

_H16 = "[0-9A-Fa-f]{1,4}"
_IPV6 = "|".join(
    [
        f"(?:{_H16}:){{7}}{_H16}",
        f"(?:{_H16}:){{1,7}}:",
        f"(?:{_H16}:){{1,6}}:{_H16}",
        f"(?:{_H16}:){{1,5}}(?::{_H16}){{1,2}}",
        f"(?:{_H16}:){{1,4}}(?::{_H16}){{1,3}}",
        f"(?:{_H16}:){{1,3}}(?::{_H16}){{1,4}}",
        f"(?:{_H16}:){{1,2}}(?::{_H16}){{1,5}}",
        f"{_H16}:(?::{_H16}){{1,6}}",
        f":(?:(?::{_H16}){{1,7}}|:)",
    ]
)
_PORT = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
#: http(s)://host[:port][/path?query#fragment], the path printable.
ENDPOINT_PATTERN = (
    f"^[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9._~%-]+|\\[(?:{_IPV6})\\])(?::{_PORT})?"
    f"(?:[/?#][{_P} ]*)?$"
)

_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
#: From year 2: year 1 holds Go's zero time, which Alertmanager sends for "no time".
_YEAR_FROM_2 = "(?:[0-9]{3}[2-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
_DAY = (
    "-"
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-9]))"
)
_CLOCK = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?"
#: RFC 3339 in ASCII digits, with a real month, day and time (29 February of any year: the
#: server refuses it in a year that has none), and a "T" between date and time (the form
#: the format date-time names; Alertmanager sends it).
_ZONE = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
TIMESTAMP_PATTERN = f"^{_YEAR}{_DAY}[Tt]{_CLOCK}{_ZONE}$"
#: A ``startsAt``: a timestamp from year 2 (the zero time is no start).
START_PATTERN = f"^{_YEAR_FROM_2}{_DAY}[Tt]{_CLOCK}{_ZONE}$"

TIME_PATTERNS = (TIMESTAMP_PATTERN, START_PATTERN)
_NAME_RE = re.compile(NAME_PATTERN)
_TEXT_RE = re.compile(TEXT_PATTERN)
_ENDPOINT_RE = re.compile(ENDPOINT_PATTERN)
TIMESTAMP_RE = re.compile(TIMESTAMP_PATTERN)


def is_name(text: str) -> bool:
    """A usable cluster or app name: 1 to 253 printable characters, no space at either end
    (``fleetwatch.common.names``, which says why each character class is refused).

    A cluster's name is its kubeconfig context name, and kubeconfigs allow inner spaces
    ("prod east"): refusing them would leave such a cluster UNKNOWN for ever. Printable
    excludes tabs, newlines and every other whitespace but the plain space.
    """
    return 0 < len(text) <= MAX_NAME and _NAME_RE.fullmatch(text) is not None


# -- checks, raising the message that follows the field's name ----------------------------


class Problem(ValueError):
    """A value a field cannot take; ``reactor.models.problem`` puts the field's name before it."""


def _check_name(value: object) -> str:
    if not isinstance(value, str):
        raise Problem("must be a string")
    if not 0 < len(value) <= MAX_NAME:
        raise Problem(f"must have 1 to {MAX_NAME} characters")
    if _NAME_RE.fullmatch(value) is None:
        # The offending character by its code point: echoed raw, it is the problem.
        raise Problem(
            f"must be printable characters, without a space at either end: it {name_flaw(value)}"
        )
    return value


def _check_text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Problem("must be a non-empty string")
    if len(value) > MAX_TEXT or _TEXT_RE.fullmatch(value) is None:
        raise Problem(f"must be at most {MAX_TEXT} printable characters")
    return value


def _check_endpoint(value: object) -> str:
    value = _check_text(value)
    try:
        parts = urlsplit(value)
        usable = parts.scheme in ("https", "http") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:  # e.g. "https://[::1": an unclosed IPv6 bracket
        usable = False
    if not usable or _ENDPOINT_RE.fullmatch(value) is None:
        raise Problem("must be an http(s) URL such as https://127.0.0.1:6443")
    return value


# -- the field types ---------------------------------------------------------------------

Name = Annotated[
    str,
    BeforeValidator(_check_name),
    Field(
        min_length=1,
        max_length=MAX_NAME,
        json_schema_extra={"pattern": NAME_PATTERN},
        description=(
            "1 to 253 printable characters, no space at either end (inner spaces are "
            "allowed: kubeconfig context names have them)"
        ),
    ),
]
Text = Annotated[
    str,
    BeforeValidator(_check_text),
    Field(
        min_length=1,
        max_length=MAX_TEXT,
        json_schema_extra={"pattern": TEXT_PATTERN},
        description="1 to 4096 printable characters, not only spaces",
    ),
]
Endpoint = Annotated[
    str,
    BeforeValidator(_check_endpoint),
    Field(
        min_length=1,
        max_length=MAX_TEXT,
        json_schema_extra={"pattern": ENDPOINT_PATTERN, "format": "uri"},
        description="the API server's http(s) URL",
        examples=["https://127.0.0.1:6443"],
    ),
]
#: Checked by pydantic's own (Rust) regex: a webhook carries thousands of them.
Timestamp = Annotated[
    str, Field(pattern=TIMESTAMP_PATTERN, json_schema_extra={"format": "date-time"})
]
Start = Annotated[str, Field(pattern=START_PATTERN, json_schema_extra={"format": "date-time"})]
Labels = dict[str, str]


# -- the caller's input in a message -----------------------------------------------------


def kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def clip(text: str, limit: int = 80) -> str:
    """Echo at most ``limit`` characters of the caller's input back in a message or a log."""
    return text if len(text) <= limit else text[:limit] + "..."
