"""One kept-alive connection to an API server: a non-blocking socket, TLS on it, one answer
at a time.

Why an ``ssl.SSLSocket`` on the socket itself, driven by the event loop's ``add_reader`` /
``add_writer``, rather than an asyncio transport or an ``ssl.SSLObject`` over two
``ssl.MemoryBIO``: the exporter keeps one connection per cluster, so at fleet scale what
each idle connection holds is most of the exporter's memory. A ``MemoryBIO`` keeps its
high-water buffer for the connection's life. OpenSSL reading the socket itself frees its
record buffers whenever the connection is idle (CPython sets
``SSL_MODE_RELEASE_BUFFERS``), and the write buffer its handshake leaves is freed by an
empty write (:meth:`Connection._release_buffers`). Without the transport's layers a
kept-alive GET costs less CPU too. The figures: docs/exporter.md, ``bench/connections.py``.

What a connection does, as the pool (``exporter.net.pool``) drives it:

- The socket is connected already (``exporter.net.tcp.open_socket``). The reader stays
  registered for the connection's life, so an idle connection notices at once when the
  server closes it, and reads the TLS 1.3 messages that come after the handshake (session
  tickets, a key update, whose answer OpenSSL writes itself).
- TLS: ``do_handshake`` again whenever the socket is ready, as ``SSLWantReadError`` or
  ``SSLWantWriteError`` asked, each step within the loop's budget of probe work per
  turn (``exporter.net.turns``: past it, the connection stops listening to its socket
  until its step's turn comes). Reads go on until ``SSLWantReadError``, or until the
  answer is complete with nothing decrypted left in OpenSSL (``pending()``): nothing is
  left behind waiting for a readiness that will not come. A read may want to write (a
  key update's answer on a full socket) and a write may not complete at once: each waits
  for the readiness it wants. ``close_notify``, a TCP close without it and a reset all
  are the end of the connection.
- The answer is read by :class:`exporter.net.http1.ResponseParser`; :meth:`Connection.send`
  returns the future that ends with it.

Through an HTTP proxy the connection starts with a tunnel: ``CONNECT host:port`` is sent
to the proxy, its answer head read on the plain socket (a 2xx opens the tunnel; anything
else, or the proxy closing, is a :attr:`~exporter.net.http1.Failure.PROXY` failure), and only
then is the same socket wrapped for TLS with the API server: the proxy sees host and
port, never the requests. The head is read with ``MSG_PEEK`` first, so that not one byte
past it is taken from the socket: whatever follows belongs to the tunnel.

Long because a connection's whole life is one state machine driven by the loop's
readiness callbacks (tunnel, handshake and its turns, TLS reads and writes, the answer
and every way it ends): each part reads and sets the others' state.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl

from exporter.net.http1 import MAX_HEADER_BYTES, Failure, HttpError, ResponseParser, short
from exporter.net.turns import TurnBudget

#: Bytes asked of one read: more than a TLS record holds (16 KiB), so one call per record.
READ_SIZE = 65536


class Connection:
    """One TCP connection, its TLS state, and the answer being read (one at a time).

    Created on a connected socket: it starts at once with the proxy's tunnel (``tunnel``,
    the ``CONNECT`` request) or the TLS handshake; :meth:`ready` is the future of either.
    """

    __slots__ = (
        "_context",
        "_fd",
        "_head",
        "_hostname",
        "_loop",
        "_out",
        "_parked",
        "_parser",
        "_read_wants_write",
        "_sock",
        "_tls",
        "_turns",
        "_waiter",
        "_write_wants_read",
        "_writing",
        "closed",
        "handshaking",
        "keep_alive",
        "last_used",
        "pooled",
        "tunnelling",
    )

    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext | None,
        server_hostname: str | None,
        tunnel: bytes | None = None,
        turns: TurnBudget | None = None,
    ) -> None:
        """``sock``: connected, non-blocking; ``tunnel``: the ``CONNECT`` request to send
        first, when ``sock`` is connected to a proxy; ``turns``: the loop's budget of
        probe work per turn, its handshake steps among it (``exporter.net.turns``; None: none)."""
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        self._context = context
        self._hostname = server_hostname
        self._tls: ssl.SSLSocket | None = None
        self._turns = turns
        self._parked = False  #: its handshake step waits for a later turn (no reader)
        self._out: bytes | memoryview = b""  #: bytes still to write (TLS: the write to retry)
        self._writing = False  #: the writer is registered
        self._read_wants_write = False  #: a TLS read waits for the socket to be writable
        self._write_wants_read = False  #: a TLS write waits for the socket to be readable
        self._head: bytearray | None = None  #: the proxy's answer head, while tunnelling
        self._parser: ResponseParser | None = None  #: the answer being read, if any
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.keep_alive = True
        self.pooled = False  #: one of the pool's kept connections (idle or in use)
        self.last_used = 0.0  #: loop time it went idle
        #: waiting for the proxy's answer to ``CONNECT`` (the caller's timeout names it)
        self.tunnelling = tunnel is not None
        self.handshaking = False
        self._loop.add_reader(self._fd, self._on_readable)
        if tunnel is not None:
            self._head = bytearray()
            self._waiter = self._loop.create_future()
            self._write(tunnel)
        elif context is not None:
            self._waiter = self._loop.create_future()
            self._start_handshake()

    def ready(self) -> asyncio.Future[None] | None:
        """The future of the tunnel or the TLS handshake (maybe done already), else None."""
        return self._waiter if self._parser is None else None

    def start_tls(self) -> asyncio.Future[None] | None:
        """Start the TLS handshake inside an open tunnel; its future, or None without TLS."""
        if self._context is None:
            return None
        self._waiter = waiter = self._loop.create_future()
        if self.closed:
            self._fail(_closed_in_handshake())
        else:
            self._loop.add_reader(self._fd, self._on_readable)  # removed while it waited
            self._start_handshake()
        return waiter

    def send(self, request: bytes, max_bytes: int) -> asyncio.Future[None]:
        """Write one request; the returned future ends when its answer is complete."""
        self._parser = ResponseParser(max_bytes)
        self._waiter = waiter = self._loop.create_future()
        if self.closed:  # the server closed it while the request waited for a slot
            self._at_eof()
        else:
            self._write(request)
        return waiter

    def result(self) -> tuple[int, bytes]:
        """``(status, body)`` of the answer just completed; frees the buffers."""
        parser = self._parser
        assert parser is not None
        if not parser.keep_alive or self._out:  # answered before the request was all sent
            self.keep_alive = False
        self._parser = None
        self._waiter = None
        return parser.result()

    def close(self) -> None:
        """Close the socket (no ``close_notify``: nobody reads it) and forget the buffers.

        A request still waiting (the pool is closing) fails, and is not retried.
        """
        self.keep_alive = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(
                HttpError(Failure.CONNECT, "connection closed by the exporter", answered=True)
            )
        if not self.closed:
            self._close_socket()

    # -- readiness callbacks of the loop -----------------------------------------------

    def _on_readable(self) -> None:
        if self._write_wants_read:
            self._write_wants_read = False
            self._flush()
            if self.closed:
                return
        if self.tunnelling:
            self._read_tunnel()
        elif self.handshaking:
            self._handshake_step()
        elif self._tls is not None:
            self._read_tls()
        else:
            self._read_plain()

    def _on_writable(self) -> None:
        self._loop.remove_writer(self._fd)
        self._writing = False
        if self.handshaking:
            self._handshake_step()
            return
        if self._out:
            self._flush()
        if self._read_wants_write and not self.closed:
            self._read_wants_write = False
            self._read_tls()

    def _want_writable(self) -> None:
        if not self._writing:
            self._writing = True
            self._loop.add_writer(self._fd, self._on_writable)

    # -- writing -----------------------------------------------------------------------

    def _write(self, data: bytes | memoryview) -> None:
        self._out = data
        self._flush()

    def _flush(self) -> None:
        """Write what ``_out`` holds, as far as the socket takes it now."""
        data = self._out
        tls = self._tls
        try:
            # TLS writes all of it or nothing (OpenSSL's partial writes are off)
            sent = tls.write(data) if tls is not None else self._sock.send(data)
        except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            self._want_writable()
            return
        except ssl.SSLWantReadError:  # TLS wants the peer's bytes first
            self._write_wants_read = True
            return
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
            self._out = b""
            self._at_eof()  # the server closed it: the stage tells what that means
            return
        except ssl.SSLError as exc:
            self._out = b""
            self._fail(HttpError(Failure.TLS, f"TLS error: {short(exc)}"))
            return
        except OSError:  # reset, broken pipe: the connection is gone, as at its end
            self._out = b""
            self._at_eof()
            return
        if sent < len(data):
            self._out = memoryview(data)[sent:]
            self._want_writable()
        else:
            self._out = b""

    # -- the proxy's tunnel --------------------------------------------------------------

    def _read_tunnel(self) -> None:
        head = self._head
        assert head is not None
        try:
            data = self._sock.recv(MAX_HEADER_BYTES, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._at_eof()
            return
        # The end of the head may straddle what was taken before and what came now.
        start = max(0, len(head) - 3)
        end = (bytes(head[start:]) + data).find(b"\r\n\r\n")
        if end < 0:
            head += self._sock.recv(len(data))  # all of it is head: take it
            if len(head) > MAX_HEADER_BYTES:
                self._fail(HttpError(Failure.PROXY, "answered CONNECT with headers too long"))
            return
        head += self._sock.recv(start + end + 4 - len(head))  # the head, not one byte more
        status_line = bytes(head[: head.find(b"\r\n")]).decode("latin-1")
        parts = status_line.split(" ", 2)
        ok = len(parts) >= 2 and parts[0].startswith("HTTP/1.") and parts[1].isdigit()
        if not ok or not 200 <= int(parts[1]) < 300:
            what = f"HTTP {' '.join(parts[1:])}" if ok else "not HTTP"
            self._fail(HttpError(Failure.PROXY, f"refused CONNECT: {short(what, 80)}"))
            return
        self.tunnelling = False
        self._head = None
        if self._context is not None:
            # Until start_tls() (after the cycle's slot, maybe later): what comes now is
            # the handshake's, and the level-triggered reader would spin on it.
            self._loop.remove_reader(self._fd)
        self._resolve()

    # -- TLS -----------------------------------------------------------------------------

    def _start_handshake(self) -> None:
        assert self._context is not None
        self.handshaking = True
        try:
            self._tls = self._context.wrap_socket(
                self._sock, server_hostname=self._hostname, do_handshake_on_connect=False
            )
        except (ssl.SSLError, ValueError) as exc:
            self._fail(HttpError(Failure.TLS, f"TLS error: {short(exc)}"))
            return
        except OSError:  # not connected any more: the peer went away
            self._fail(_closed_in_handshake())
            return
        self._sock = self._tls  # the same descriptor: the reader stays registered
        self._handshake_step()

    def _handshake_step(self) -> None:
        """The next step of the handshake: now, or at a later turn of the loop when this
        turn has done its share of handshakes (``exporter.net.turns``)."""
        if self._turns is None:
            self._handshake()
        else:
            self._turns.run(self._resume_handshake, self._park)

    def _park(self) -> None:
        """Stop listening to the socket until the step's turn comes (the readiness is
        level-triggered: it would be reported again every turn, for nothing)."""
        self._parked = True
        self._loop.remove_reader(self._fd)
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._fd)

    def _resume_handshake(self) -> None:
        if self._parked:
            self._parked = False
            if self.closed or not self.handshaking:
                return  # closed meanwhile (a deadline, the pool closing)
            self._loop.add_reader(self._fd, self._on_readable)
        self._handshake()

    def _handshake(self) -> None:
        tls = self._tls
        assert tls is not None
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            return  # the reader is registered
        except ssl.SSLWantWriteError:
            self._want_writable()
            return
        except ssl.SSLCertVerificationError as exc:
            self._fail(HttpError(Failure.TLS, f"certificate not accepted: {short(exc)}"))
            return
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
            self._fail(_closed_in_handshake())
            return
        except ssl.SSLError as exc:
            self._fail(HttpError(Failure.TLS, f"TLS error: {short(exc)}"))
            return
        except OSError:  # reset, not connected: the socket's error, not TLS's
            self._fail(_closed_in_handshake())
            return
        self.handshaking = False
        self._release_buffers()
        self._resolve()
        if tls.pending():  # decrypted already: no readiness will announce it
            self._read_tls()

    def _release_buffers(self) -> None:
        """Have OpenSSL free the write buffer its handshake left (about 16 KiB).

        OpenSSL's state machine allocates a write buffer whenever it runs (the handshake,
        and again for every post-handshake message, such as TLS 1.3's session tickets
        that come right after it), and ``SSL_MODE_RELEASE_BUFFERS`` frees it only at the
        end of an application write. An empty write is one, and sends nothing: an idle
        connection then holds about 24 KiB instead of 40 until its first request.
        """
        tls = self._tls
        if tls is not None and not self._out:  # never while a write waits to be retried
            with contextlib.suppress(ssl.SSLError, OSError, ValueError):
                tls.write(b"")

    def _read_tls(self) -> None:
        tls = self._tls
        assert tls is not None
        while True:
            try:
                data = tls.read(READ_SIZE)  # b"" at close_notify and at a TCP close without it
            except ssl.SSLWantReadError:
                if self._parser is None:  # idle: TLS's own messages (session tickets)
                    self._release_buffers()
                return
            except ssl.SSLWantWriteError:  # a key update's answer waits for room to write
                self._read_wants_write = True
                self._want_writable()
                return
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                data = b""
            except ssl.SSLError as exc:
                self._fail(HttpError(Failure.TLS, f"TLS error: {short(exc)}", answered=True))
                return
            except OSError:  # reset: the end of the connection
                data = b""
            if not data:
                self._at_eof()
                return
            self._feed(data)
            if self.closed:
                return
            if self._waiter is not None and self._waiter.done() and not tls.pending():
                # The answer is complete and OpenSSL holds nothing decrypted: what may
                # follow is still in the socket, and the reader is called for it. Saves
                # the read that would only raise SSLWantReadError, on every answer.
                return

    # -- plain HTTP ----------------------------------------------------------------------

    def _read_plain(self) -> None:
        try:
            data = self._sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self._feed(data)
        else:
            self._at_eof()

    # -- the answer ----------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        parser = self._parser
        if parser is None or self._waiter is None or self._waiter.done():
            self.keep_alive = False  # bytes nobody asked for: do not reuse this connection
            return
        try:
            done = parser.feed(data)
        except HttpError as exc:
            self._fail(exc)
            return
        if done:
            self._resolve()

    def _at_eof(self) -> None:
        """The peer closed (or reset) the connection: what that means depends on the stage."""
        self.keep_alive = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            if self.tunnelling:
                waiter.set_exception(
                    HttpError(Failure.PROXY, "closed the connection before answering CONNECT")
                )
            elif self.handshaking or self._parser is None:
                waiter.set_exception(_closed_in_handshake())
            else:
                try:
                    self._parser.feed_eof()
                except HttpError as exc:
                    waiter.set_exception(exc)
                else:
                    waiter.set_result(None)
        if not self.closed:
            self._close_socket()

    def _resolve(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: HttpError) -> None:
        self.keep_alive = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        if not self.closed:
            self._close_socket()

    def _close_socket(self) -> None:
        # Unregister first: the descriptor's number is reused by the next socket opened.
        self.closed = True
        self._loop.remove_reader(self._fd)
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._fd)
        self._sock.close()
        self._out = b""
        self._head = None


def _closed_in_handshake() -> HttpError:
    return HttpError(Failure.CONNECT, "connection closed during the TLS handshake")
