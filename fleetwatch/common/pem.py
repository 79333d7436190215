"""A client certificate and key given as PEM bytes, loaded into an SSL context.

``ssl.SSLContext.load_cert_chain`` reads files only, and a kubeconfig or a Secret holds the
certificate and key inline. A key must never touch a disk: the chain is handed to OpenSSL
as an in-memory file (``memfd_create``, read back through ``/proc/self/fd``). Where there
is none (not Linux), a file of mode 600 in a private folder of mode 700, removed at once.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile


def load_cert_chain_pem(ctx: ssl.SSLContext, pem: bytes, label: str) -> None:
    """Load the certificate chain and key in ``pem`` into ``ctx``; ``label`` names the
    in-memory file (seen in ``/proc/PID/fd``) or the temporary folder."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create(f"fleetwatch-{label}-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    folder = tempfile.mkdtemp(prefix=f"fleetwatch-{label}-tls-")  # 0700
    path = os.path.join(folder, "client.pem")
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path)
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)
        with contextlib.suppress(OSError):
            os.rmdir(folder)
