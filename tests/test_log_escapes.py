"""Log lines never carry a raw control, C1 or bidi character (fleetwatch.common.logs,
fleetwatch.common.names).

A name read from a kubeconfig, a Secret or an API body is logged as found; the logfmt and
JSON formatters escape what no name may hold, so a line cannot be forged or drive the
terminal that shows it, and a reader decodes the escapes back to the text logged.
"""

from __future__ import annotations

import io
import json
import logging
import re

import pytest

from fleetwatch.common.logs import JsonFormatter, LogfmtFormatter, setup_logging
from tests.helpers.discovery_names import BAD_NAMES, BadName, no_raw_control


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("discovery", logging.WARNING, __file__, 1, message, args, None)


def logfmt_msg(line: str) -> str:
    """The ``msg`` value of a logfmt line, decoded (our escapes are JSON's)."""
    found = re.search(r' msg=("(?:[^"\\]|\\.)*"|\S*)', line)
    assert found is not None, line
    value = found.group(1)
    decoded: str = json.loads(value) if value.startswith('"') else value
    return decoded


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_logfmt_escapes_every_character_a_name_may_not_hold(bad: BadName) -> None:
    line = LogfmtFormatter().format(record("cluster %s: skipped", bad.name))
    no_raw_control(line, lines=False)
    assert logfmt_msg(line) == f"cluster {bad.name}: skipped"


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_json_escapes_every_character_a_name_may_not_hold(bad: BadName) -> None:
    line = JsonFormatter().format(record("cluster %s: skipped", bad.name))
    no_raw_control(line, lines=False)
    assert json.loads(line)["msg"] == f"cluster {bad.name}: skipped"


@pytest.mark.parametrize("formatter", [LogfmtFormatter(), JsonFormatter()])
def test_beyond_the_bmp_and_plain_text_survive_the_escapes(formatter: logging.Formatter) -> None:
    message = 'k8s "prod" \\ münchen \U000e0001 tag \U0001f600 ok'
    line = formatter.format(record("%s", message))
    no_raw_control(line, lines=False)
    assert "\\udb40\\udc01" in line and "münchen" in line and "\U0001f600" in line
    if isinstance(formatter, LogfmtFormatter):
        assert logfmt_msg(line) == message
    else:
        assert json.loads(line)["msg"] == message


def test_a_plain_word_stays_bare_in_logfmt_and_quotes_are_escaped() -> None:
    assert " msg=ready" in LogfmtFormatter().format(record("ready"))
    line = LogfmtFormatter().format(record('say "hi" \\ to prod east'))
    assert line.endswith(' msg="say \\"hi\\" \\\\ to prod east"'), line
    assert logfmt_msg(line) == 'say "hi" \\ to prod east'


def test_the_installed_handler_writes_no_raw_byte_in_either_format() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        for fmt in ("logfmt", "json"):
            stream = io.StringIO()
            setup_logging("info", fmt, stream)
            logging.getLogger("discovery").warning("context %r and %s", "a\x1bb", "c\x9bd\u202e")
            text = stream.getvalue()
            assert text.count("\n") == 1, text
            no_raw_control(text)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
