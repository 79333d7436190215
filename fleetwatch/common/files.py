"""Reading a file within bounds: the kubeconfigs discovery reads, the token files of
``fleetwatch.kube``.

Never more than :data:`MAX_FILE_BYTES` (or the caller's limit), only regular files (a FIFO
would block the reader forever), and a file that changed while it was read is reported as
such rather than parsed half-written. It sits here, below discovery and the Kubernetes
client both, so that each reads a file the same way and neither imports the other.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "FileVersion", "ReadError", "file_version", "os_reason", "read_file"]

#: The largest kubeconfig read, in bytes. Kubernetes caps a Secret at 1 MiB, so a mounted
#: kubeconfig is far below it; a main kubeconfig of 5,000 contexts with embedded RSA
#: certificates is about 28 MB (libyaml parses it in about 2.5 s, 95 MB of memory).
#: Anything bigger is a mistake or an attack (a log file, a disk image): refused before
#: a byte of it is parsed.
MAX_FILE_BYTES = 32 * 1024 * 1024

#: What identifies one version of a file: a change of any of them means "parse again".
#: (device, inode, size, mtime in ns, ctime in ns: ``cp -p`` and ``rsync -t`` keep size
#: and mtime, never ctime); a merged ``KUBECONFIG`` list chains its files'.
#: ``fleetwatch.discovery.settle`` reads the inode and the two times of a file's version.
FileVersion = tuple[int, ...]


class ReadError(Exception):
    """A file that cannot be read; ``reason`` is the problem's text (never its content)."""

    def __init__(self, reason: str, *, missing: bool = False, changing: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        #: the file does not exist (removed): its clusters go, unlike any other failure
        self.missing = missing
        #: the file changed while it was read: being written (``fleetwatch.discovery.settle``)
        self.changing = changing


def file_version(path: Path) -> FileVersion:
    """The version of ``path`` (links followed); raises :class:`ReadError`."""
    try:
        return _version(os.stat(path))
    except OSError as exc:
        raise _read_error(exc) from None


def read_file(path: Path, limit: int = MAX_FILE_BYTES) -> tuple[FileVersion, bytes]:
    """The bytes of a regular file of at most ``limit`` bytes, and the version read.

    Raises :class:`ReadError` for a missing, unreadable, special or too big file, and
    for a file that changed while it was read (a writer truncating and rewriting it in
    place): the next cycle reads it again.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer that never comes.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _read_error(exc) from None
    try:
        before = os.fstat(fd)
        if stat.S_ISDIR(before.st_mode):
            raise ReadError("not a file")
        if not stat.S_ISREG(before.st_mode):
            raise ReadError("not a regular file")
        if before.st_size > limit:
            raise ReadError(f"too big: {before.st_size} bytes, the limit is {limit}")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ReadError(f"too big: more than {limit} bytes")
        after = os.fstat(fd)
    except OSError as exc:
        raise _read_error(exc) from None
    finally:
        os.close(fd)
    version = _version(after)
    if version != _version(before) or size != after.st_size:
        raise ReadError("changed while being read (being written?)", changing=True)
    return version, b"".join(chunks)


def _version(st: os.stat_result) -> FileVersion:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_error(exc: OSError) -> ReadError:
    if exc.errno == errno.ENOENT:
        return ReadError("file not found", missing=True)
    if exc.errno == errno.ELOOP:
        return ReadError("symlink loop")
    if exc.errno == errno.EISDIR:
        return ReadError("not a file")
    return ReadError(os_reason(exc))


def os_reason(exc: OSError) -> str:
    """An OS error in a few words (``permission denied``), without the path."""
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    return exc.strerror.lower() if exc.strerror else type(exc).__name__
