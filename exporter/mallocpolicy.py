"""glibc's malloc, told once at start to hand big blocks back to the system when freed.

Why. Every kept-alive TLS connection makes OpenSSL allocate a record buffer of about
17 KiB whenever it reads or writes, and free it when the connection is idle again
(CPython sets ``SSL_MODE_RELEASE_BUFFERS``): at 10,000 clusters, 30,000 such blocks
come and go every cycle, between the connections' long-lived state. glibc serves blocks
under its mmap threshold (128 KiB at first) from the heap, where the freed ones stay
resident; with the threshold at 16 KiB they are mapped and unmapped, and the memory goes
back at once. Measured at 10,000 stand-in clusters (probe only, bench/RESULTS.md round
3): peak RSS 468 -> 421 MiB, the same CPU per cycle. It is glibc's documented tunable
(``MALLOC_MMAP_THRESHOLD_`` in the environment sets the same; a value there wins, as the
operator's choice).

Installed by the exporter process (``exporter.cli``); elsewhere (musl, macOS) nothing.

:func:`trim` asks glibc to hand back the free pages inside its heaps (``malloc_trim``):
Secrets' data released once read (``fleetwatch.discovery.apisource.SecretReads``) are thousands of
blocks of a few KiB freed between live objects, which stay resident otherwise: measured
at 2,000 Secrets, releasing them alone left the RSS per cluster unchanged.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: glibc's ``M_MMAP_THRESHOLD`` parameter of ``mallopt``.
_M_MMAP_THRESHOLD = -3
#: Blocks of this size and more are mapped: OpenSSL's record buffers (~17 KiB) are.
MMAP_THRESHOLD = 16 * 1024


def install(threshold: int = MMAP_THRESHOLD) -> bool:
    """Set glibc's mmap threshold; False where there is no glibc or the environment set it."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))


def trim() -> bool:
    """``malloc_trim(0)``: free pages of every arena back to the system (False: no glibc).

    A walk of the heaps, milliseconds at hundreds of MiB; called from a worker thread
    (ctypes lets go of the GIL meanwhile), after a scan released many Secrets.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        malloc_trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    malloc_trim(0)
    return True
