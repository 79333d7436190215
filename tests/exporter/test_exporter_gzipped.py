"""gzip bodies from pieces compressed apart: valid gzip, the right CRC, the bytes given in.

Every body is read back by zlib and by Python's ``gzip`` (both check the CRC-32 and the
length in the trailer); Prometheus reads the exporter's (tests/controlplane).
"""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from exporter.expose.gzipped import Body, Deflater, Piece, crc32_combine, deflated, joined

RNG = random.Random(1313)
TEXT = b"".join(
    f'fleetwatch_etcd_member_healthy{{cluster="c-{i}",member="cp-{i % 3}"}} {i % 2}\n'.encode()
    for i in range(3000)
)
NOISE = RNG.randbytes(70_000)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (b"", b""),
        (b"", b"x"),
        (b"x", b""),
        (b"a", b"b"),
        (TEXT[:1000], TEXT[1000:]),
        (NOISE[:1], NOISE[1:]),
        (NOISE[:65536], NOISE[65536:]),
        (NOISE, TEXT),
    ],
)
def test_crc32_combine_is_the_crc_of_the_concatenation(a: bytes, b: bytes) -> None:
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.mark.parametrize("lengths", [(2**32, 5), (2**33 + 17, 2**31 - 1), (1, 2**40)])
def test_crc32_combine_holds_for_lengths_past_4_gib(lengths: tuple[int, int]) -> None:
    """No such data here: combining is associative, whatever the lengths."""
    c1, c2, c3 = (zlib.crc32(x) for x in (b"one", b"two", b"three"))
    l2, l3 = lengths
    left = crc32_combine(crc32_combine(c1, c2, l2), c3, l3)
    assert left == crc32_combine(c1, crc32_combine(c2, c3, l3), l2 + l3)


def splits(data: bytes, count: int) -> list[bytes]:
    cuts = sorted(RNG.randrange(len(data) + 1) for _ in range(count - 1))
    return [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@pytest.mark.parametrize("level", [1, 6, 9])
@pytest.mark.parametrize("data", [TEXT, NOISE, TEXT + NOISE + TEXT, b""], ids=len)
@pytest.mark.parametrize("count", [1, 2, 7])
def test_pieces_compressed_apart_are_one_gzip_member(data: bytes, count: int, level: int) -> None:
    pieces = [deflated(splits(part, 3), level) for part in splits(data, count)]
    body = Body.of(pieces)
    assert gzip.decompress(body.gzip) == data
    inflate = zlib.decompressobj(wbits=31)
    assert inflate.decompress(body.gzip) == data and inflate.eof and not inflate.unused_data
    assert body.size == len(data) == joined(pieces).size
    assert Body.of([joined(pieces)]).gzip == body.gzip  # a kept piece is the same bytes
    assert body.plain() == data


def test_a_piece_written_in_parts_is_the_crc_and_size_of_the_whole() -> None:
    deflater = Deflater(1)
    for part in splits(TEXT, 9):
        deflater.write(part)
    piece = deflater.piece()
    assert (piece.crc, piece.size) == (zlib.crc32(TEXT), len(TEXT))
    assert zlib.decompressobj(wbits=-15).decompress(piece.data) == TEXT
    assert isinstance(piece, Piece)


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 18])
def test_a_body_is_given_whole_in_chunks_of_at_most_the_size_asked(size: int) -> None:
    body = Body.of([deflated([TEXT, NOISE], 1)])
    chunks = list(body.chunks(size))
    assert b"".join(chunks) == TEXT + NOISE
    assert all(0 < len(c) <= size for c in chunks)


def test_a_truncated_body_ends_instead_of_looping() -> None:
    whole = RNG.randbytes(100_000)  # incompressible: the cut loses data
    body = Body(gzip.compress(whole)[:-2000], len(whole))
    given = b"".join(body.chunks(1000))
    assert 0 < len(given) < len(whole) and whole.startswith(given)
    assert b"".join(Body(b"", 0).chunks()) == b""
