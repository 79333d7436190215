"""The HTTP/1.1 answer parser, byte by byte: any split of an answer into reads, any body.

The parser is pure (no socket), so Hypothesis drives it directly: every framing the
probes meet (Content-Length, chunked with trailers, to the end of the connection,
informational answers first), fed in arbitrary pieces, gives the same status and body as
fed at once; the body bound and keep-alive rules hold; garbage only ever raises HttpError.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.net.http1 import (
    MAX_HEADER_BYTES,
    Endpoint,
    Failure,
    HttpError,
    ResponseParser,
    request_bytes,
)

STATUSES = st.sampled_from([200, 401, 403, 404, 500, 503])
BODIES = st.binary(max_size=3000)


def content_length(status: int, body: bytes) -> bytes:
    return b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)


def chunked(status: int, body: bytes, sizes: list[int], trailers: bool) -> bytes:
    out = [b"HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n\r\n" % status]
    pos = 0
    for size in [*sizes, len(body)]:
        piece = body[pos : pos + max(1, size)]
        if not piece:
            break
        out.append(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
        pos += len(piece)
    out.append(b"0\r\nX-Trailer: 1\r\n\r\n" if trailers else b"0\r\n\r\n")
    return b"".join(out)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return [p for p in pieces if p]


def feed_all(parser: ResponseParser, pieces: list[bytes]) -> int:
    """Feed pieces until done; how many pieces it took."""
    for i, piece in enumerate(pieces):
        if parser.feed(piece):
            return i + 1
    return len(pieces) + 1


@st.composite
def answers(draw: st.DrawFn) -> tuple[bytes, int, bytes]:
    status, body = draw(STATUSES), draw(BODIES)
    if draw(st.booleans()):
        wire = content_length(status, body)
    else:
        sizes = draw(st.lists(st.integers(1, 700), max_size=8))
        wire = chunked(status, body, sizes, draw(st.booleans()))
    if draw(st.booleans()):
        wire = b"HTTP/1.1 100 Continue\r\n\r\n" + wire
    return wire, status, body


@given(answers(), st.lists(st.integers(0, 10_000), max_size=20))
def test_any_split_of_an_answer_reads_the_same(
    answer: tuple[bytes, int, bytes], cuts: list[int]
) -> None:
    wire, status, body = answer
    parser = ResponseParser(max_bytes=1 << 20)
    pieces = split(wire, cuts)
    assert feed_all(parser, pieces) == len(pieces)  # complete exactly with its last byte
    assert parser.result() == (status, body)
    assert parser.keep_alive


@given(STATUSES, BODIES, st.lists(st.integers(0, 10_000), max_size=10))
def test_a_body_to_the_end_of_the_connection_completes_at_eof(
    status: int, body: bytes, cuts: list[int]
) -> None:
    wire = b"HTTP/1.1 %d X\r\nConnection: close\r\n\r\n%s" % (status, body)
    parser = ResponseParser(max_bytes=1 << 20)
    for piece in split(wire, cuts):
        assert not parser.feed(piece)
    parser.feed_eof()
    assert parser.result() == (status, body)
    assert not parser.keep_alive


@given(answers(), st.integers(1, 2000))
def test_the_body_is_cut_at_max_bytes_and_the_connection_not_reused(
    answer: tuple[bytes, int, bytes], max_bytes: int
) -> None:
    wire, status, body = answer
    parser = ResponseParser(max_bytes=max_bytes)
    if b"chunked" in wire or len(body) <= max_bytes:
        assert parser.feed(wire)
    else:  # the head and max_bytes of the body are enough: the rest is not waited for
        assert parser.feed(wire[: len(wire) - len(body) + max_bytes])
    got_status, got = parser.result()
    assert (got_status, got) == (status, body[:max_bytes])
    # A connection whose answer was not read to its end cannot carry the next request.
    assert parser.keep_alive is (
        len(body) < max_bytes or (len(body) == max_bytes and b"chunked" not in wire)
    )


@given(answers(), st.integers(1, 100))
def test_an_answer_cut_short_is_a_connect_failure_seen_by_the_server(
    answer: tuple[bytes, int, bytes], missing: int
) -> None:
    wire, _, _ = answer
    parser = ResponseParser(max_bytes=1 << 20)
    assert not parser.feed(wire[: max(1, len(wire) - missing)])
    with pytest.raises(HttpError) as caught:
        parser.feed_eof()
    assert (caught.value.failure, caught.value.answered) == (Failure.CONNECT, True)


@given(st.binary(max_size=500), st.lists(st.integers(0, 600), max_size=10))
def test_garbage_raises_only_http_errors(data: bytes, cuts: list[int]) -> None:
    parser = ResponseParser(max_bytes=1000)
    try:
        for piece in split(data, cuts):
            if parser.feed(piece):
                parser.result()
                break
        else:
            parser.feed_eof()
            parser.result()
    except HttpError as exc:
        assert exc.failure in (Failure.PROTOCOL, Failure.CONNECT)


def test_bytes_after_a_complete_answer_forbid_reuse() -> None:
    parser = ResponseParser(max_bytes=100)
    assert parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert parser.keep_alive
    assert parser.feed(b"HTTP/1.1 200 OK\r\n")  # nobody asked for these
    assert not parser.keep_alive
    assert parser.result() == (200, b"ok")


def test_nothing_before_eof_is_retryable() -> None:
    parser = ResponseParser(max_bytes=10)
    with pytest.raises(HttpError) as caught:
        parser.feed_eof()
    assert (caught.value.failure, caught.value.answered) == (Failure.CONNECT, False)


@pytest.mark.parametrize(
    ("wire", "keep_alive"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", False),
        (b"HTTP/1.1 204 No Content\r\n\r\n", True),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", True),
    ],
)
def test_keep_alive_rules(wire: bytes, keep_alive: bool) -> None:
    parser = ResponseParser(max_bytes=100)
    assert parser.feed(wire)
    assert parser.keep_alive is keep_alive


@pytest.mark.parametrize(
    ("wire", "detail"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x answer"),
        (b"HTTP/1.1 abc\r\n\r\n", "invalid HTTP status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "invalid Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "invalid chunked"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n", "invalid chunked"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEADER_BYTES, "answer headers too long"),
    ],
)
def test_protocol_errors_say_what_is_wrong(wire: bytes, detail: str) -> None:
    with pytest.raises(HttpError) as caught:
        ResponseParser(max_bytes=100).feed(wire)
    assert caught.value.failure is Failure.PROTOCOL
    assert caught.value.detail.startswith(detail)
    assert caught.value.answered


def test_the_request_keeps_the_url_prefix_and_refuses_line_breaks() -> None:
    ep = Endpoint.parse("https://[::1]:6443/k8s/clusters/c-1/")
    assert (ep.host, ep.port, ep.host_header, ep.prefix) == (
        "::1",
        6443,
        "[::1]:6443",
        "/k8s/clusters/c-1",
    )
    wire = request_bytes(ep, "/readyz?verbose", {"Authorization": "Bearer t"})
    assert wire.startswith(b"GET /k8s/clusters/c-1/readyz?verbose HTTP/1.1\r\nHost: [::1]:6443\r\n")
    assert wire.endswith(b"Authorization: Bearer t\r\n\r\n")
    with pytest.raises(HttpError) as caught:
        request_bytes(ep, "/x\r\nEvil: 1", {})
    assert caught.value.failure is Failure.URL
    with pytest.raises(HttpError):
        Endpoint.parse("ftp://host")
