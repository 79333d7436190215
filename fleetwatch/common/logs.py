"""Logging set-up for every ``fleetwatch`` subcommand: ``--log.level`` and ``--log.format``.

Prometheus' components log ``logfmt`` (``ts=... level=... msg=...``) or JSON with UTC RFC
3339 timestamps, and log collectors parse both without configuration; ours do the same.
Installed once, by the command line, on the root logger: no module configures logging
itself.

A log line never carries a character a name may not hold (``fleetwatch.common.names``: the
controls, DEL and C1, bidi overrides and the other format characters, line separators):
both formats write each one as a JSON-style escape (``\\n``, ``\\t``, ``\\u001b``,
``\\u202e``; a pair of ``\\u`` surrogates beyond the BMP), which logfmt and JSON readers
both decode. A cluster's name, a path or an object's name from a kubeconfig, a Secret or
an API body is logged as found, and cannot forge a line or drive the terminal or viewer
that shows the log. Go's logfmt escapes only the C0 controls; DEL, C1 (0x9b is a
terminal's CSI) and U+202E pass through it, and through JSON, which requires no escape
for them.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Final, TextIO

from fleetwatch.common.names import printable, printable_char

FORMATS: Final = ("logfmt", "json")
LEVELS: Final = ("debug", "info", "warn", "warning", "error")
#: ``--log.level``'s default on every subcommand: a summary line per cycle and each
#: cluster's change of state, the rest at debug.
DEFAULT_LEVEL: Final = "info"


def _level(value: str) -> str:
    """Prometheus spells it ``warn`` (its flag's values: debug, info, warn, error), Python
    ``warning``: both are taken, in any case, as one level, named as Prometheus names it."""
    level = value.strip().lower()
    return "warn" if level == "warning" else level


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", '"': '\\"'}


def _escape(char: str) -> str:
    """One character as a JSON string escape (the form logfmt readers decode too)."""
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def printable_line(text: str) -> str:
    """``text`` with every character a name may not hold escaped; quotes and backslashes
    are left alone (the JSON encoder has escaped them already)."""
    if printable(text):
        return text
    return "".join(c if printable_char(c) else _escape(c) for c in text)


def _logfmt_value(value: str) -> str:
    if printable(value):  # the usual line: two C-speed replaces at most
        if value and not any(c in value for c in ' ="\\'):
            return value
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    inside = (c if printable_char(c) and c not in '"\\' else _escape(c) for c in value)
    return f'"{"".join(inside)}"'


class LogfmtFormatter(logging.Formatter):
    """``ts=2026-12-01T05:00:00.000Z level=info logger=exporter msg="..."``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = [
            ("ts", _timestamp(record)),
            ("level", record.levelname.lower()),
            ("logger", record.name),
            ("msg", record.getMessage()),
        ]
        if record.exc_info:
            fields.append(("err", self.formatException(record.exc_info)))
        return " ".join(f"{key}={_logfmt_value(value)}" for key, value in fields)


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the same keys as the logfmt format."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["err"] = self.formatException(record.exc_info)
        return printable_line(json.dumps(line, ensure_ascii=False))


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    """``--log.level`` and ``--log.format``, spelled and explained alike on every subcommand.

    One default for every subcommand (:data:`DEFAULT_LEVEL`): a person who learnt what
    ``fleetwatch exporter`` logs finds the same in ``discover`` and ``demo``.
    """
    parser.add_argument(
        "--log.level",
        dest="log_level",
        type=_level,
        choices=[level for level in LEVELS if level != "warning"],
        default=DEFAULT_LEVEL,
        help=f"least severe log level written to stderr (default: {DEFAULT_LEVEL}; "
        "warning is warn's other spelling)",
    )
    parser.add_argument(
        "--log.format",
        dest="log_format",
        choices=FORMATS,
        default="logfmt",
        help="format of the log lines on stderr: logfmt or json, UTC timestamps (default: logfmt)",
    )


def setup_logging(level: str = "info", fmt: str = "logfmt", stream: TextIO | None = None) -> None:
    """Send every log line to ``stream`` (stderr) in ``fmt``, at ``level`` and above.

    aiohttp's access log is kept at WARNING: a line per scrape would drown the rest.
    """
    if fmt not in FORMATS:
        raise ValueError(f"--log.format {fmt!r}: expected one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_level(level).upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
