"""gzip bodies assembled from pieces compressed apart, so that a piece can be kept and reused.

A :class:`Piece` is raw deflate data from a compressor of its own, ended on a byte
boundary (``Z_SYNC_FLUSH``): it refers to nothing before it, so pieces laid one after the
other and closed by an empty final block are one valid deflate stream (RFC 1951). The
gzip trailer's CRC-32 of the whole is combined from the pieces' own CRCs
(:func:`crc32_combine`), so a kept piece is never decompressed or read again. The
exposition compresses each metric family of the checks as a piece of its own, and sends
the pieces of the last rendering again while no check result changed.

A :class:`Body` is what is kept of an answer: the gzip bytes and the plain size; a client
that does not accept gzip is sent :meth:`Body.chunks`, decompressed as it goes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: Plain bytes per chunk sent to a client that does not accept gzip.
CHUNK = 1 << 18

#: magic, deflate, no flags, no modification time, no extra flags, OS unknown (RFC 1952)
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
#: an empty final block (fixed codes: BFINAL 1, BTYPE 01, end-of-block), on a byte boundary
_FINAL = b"\x03\x00"

#: The CRC-32 polynomial, reflected as zlib computes it: bit 31 stands for x^0, bit 0 for
#: x^31; this value is x^32 reduced modulo the polynomial.
_POLY = 0xEDB88320


def _times(a: int, b: int) -> int:
    """``a * b`` modulo the CRC-32 polynomial, both in the reflected bit order."""
    product = 0
    for bit in range(31, -1, -1):  # a's terms from x^0 up, b multiplied by x each step
        if a >> bit & 1:
            product ^= b
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


def _powers() -> tuple[int, ...]:
    """``x^(2^k)`` modulo the polynomial, for k = 0..63: each the square of the one before."""
    out = [1 << 30]  # x^1
    for _ in range(63):
        out.append(_times(out[-1], out[-1]))
    return tuple(out)


_X_2K = _powers()


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """``zlib.crc32(a + b)`` from ``crc1 = zlib.crc32(a)``, ``crc2 = zlib.crc32(b)``, ``len(b)``.

    Appending ``len2`` bytes multiplies ``a``'s remainder by ``x^(8 len2)``; the CRC's
    initial and final inversions cancel out in the sum (zlib's ``crc32_combine``).
    """
    shift = 1 << 31  # x^0
    bits, k = 8 * len2, 0
    while bits:
        if bits & 1:
            shift = _times(_X_2K[k], shift)
        bits >>= 1
        k += 1
    return _times(shift, crc1) ^ crc2


@dataclass(frozen=True, slots=True)
class Piece:
    """Raw deflate data ended on a byte boundary, and the CRC-32 and size of its plain bytes."""

    data: bytes
    crc: int
    size: int


class Deflater:
    """Plain bytes in, one :class:`Piece` out."""

    __slots__ = ("_crc", "_deflate", "_out", "_size")

    def __init__(self, level: int) -> None:
        self._deflate = zlib.compressobj(level, zlib.DEFLATED, -15)  # -15: raw, no header
        self._out: list[bytes] = []
        self._crc = 0
        self._size = 0

    def write(self, data: bytes) -> None:
        if data:
            self._crc = zlib.crc32(data, self._crc)
            self._size += len(data)
            out = self._deflate.compress(data)
            if out:
                self._out.append(out)

    def piece(self) -> Piece:
        self._out.append(self._deflate.flush(zlib.Z_SYNC_FLUSH))
        return Piece(b"".join(self._out), self._crc, self._size)


def deflated(parts: Iterable[bytes], level: int) -> Piece:
    deflater = Deflater(level)
    for part in parts:
        deflater.write(part)
    return deflater.piece()


def joined(pieces: Iterable[Piece]) -> Piece:
    """The pieces one after the other, as one piece."""
    data: list[bytes] = []
    crc = size = 0
    for piece in pieces:
        data.append(piece.data)
        crc = crc32_combine(crc, piece.crc, piece.size)
        size += piece.size
    return Piece(b"".join(data), crc, size)


@dataclass(frozen=True, slots=True)
class Body:
    """One answer as kept: gzipped (one member), and the size of its plain bytes."""

    gzip: bytes
    size: int

    @classmethod
    def of(cls, pieces: Iterable[Piece]) -> Body:
        """The gzip member of ``pieces``, one after the other."""
        data = [_HEADER]
        crc = size = 0
        for piece in pieces:
            data.append(piece.data)
            crc = crc32_combine(crc, piece.crc, piece.size)
            size += piece.size
        data += (_FINAL, struct.pack("<II", crc, size & 0xFFFFFFFF))
        return cls(b"".join(data), size)

    def chunks(self, size: int = CHUNK) -> Iterator[bytes]:
        """The plain bytes, decompressed ``size`` at a time (for clients without gzip)."""
        inflate = zlib.decompressobj(wbits=31)
        data = self.gzip
        while not inflate.eof:
            out = inflate.decompress(data, size)
            data = inflate.unconsumed_tail
            if out:
                yield out
            elif not data:
                break  # ended before its end: what was there has been given
        rest = inflate.flush()
        if rest:
            yield rest

    def plain(self) -> bytes:
        return b"".join(self.chunks())
