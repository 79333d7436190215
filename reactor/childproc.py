"""The reactor's child processes: the frames both ends speak, a child's ``main``, and the
reactor's side that starts one, reads it, and starts it again.

Why processes: at 20,000 Secrets and 10,000 Flux and Argo CD objects, a list read over TLS,
decoded and transformed is seconds of Python, and in the reactor's process every second
of it is a second its requests share the interpreter with (bench/RESULTS.md). A child
shares nothing with them but the machine's cores, and runs at :data:`NICE` above the
reactor: background work. Two use this module:
``reactor.secretchild`` (the Secrets, read into a slim fleet) and
``reactor.cd.objectchild`` (the CD objects).

**Frames**: a 4-byte big-endian length and a pickle. Both ends are this program, of the
same version, through a pipe only they hold. A child reads one frame on stdin (its start:
settings, log settings), then nothing: the end of its stdin (the reactor gone, however
it went) ends it. It writes frames only on stdout (anything else printed goes to stderr),
and at least every :data:`HEARTBEAT_S`; its log lines go to stderr in the reactor's format.

**Supervision** (:class:`Supervised`): a child that ends (a bug, the kernel's OOM killer)
is started again after 1 s, doubling to 30 s while it keeps ending; one that sends
nothing, not even its heartbeat, for :data:`SILENT_S` is hung: killed and started again.
What the reactor holds of the last one's work stays meanwhile.

I/O (processes, pipes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import struct
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, Self, TypeVar

from fleetwatch.common.logs import JsonFormatter, setup_logging
from fleetwatch.kube.informer import Informer
from fleetwatch.kube.objects import KubeObject

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")

#: A child's niceness above the reactor's. Its work is background work: when both want a
#: core, the kernel gives it to the reactor's threads first. Being a process of its own it
#: holds nothing a request waits for, unlike a thread of the reactor's at a lower priority,
#: which holds the interpreter while it waits for a core (the idle scheduling class,
#: rejected for that in bench/RESULTS.md): with a busy neighbour, the child slows down,
#: requests do not. Measured there: the first list within 2x quiet in 3 of 7 runs against
#: 1 of 7 at the reactor's own niceness, the relist in 7 of 7 against 5 of 7.
NICE = 10

#: A child sends something at least this often, a heartbeat if nothing else.
HEARTBEAT_S = 5.0

#: A child that sends nothing for this long is hung: killed and started again. Long enough
#: for a read of 20,000 Secrets on a starved machine (1-3 s on a quiet one).
SILENT_S = 60.0

#: Seconds before a child that ended is started again: doubled while it keeps ending
#: within :data:`STABLE_S`, up to :data:`RESTART_MAX_S`.
RESTART_S = 1.0
RESTART_MAX_S = 30.0
STABLE_S = 60.0

#: Seconds a child is given to end once its stdin is closed, then killed.
STOP_S = 5.0

#: Exit status when the management cluster's credentials cannot be read: starting again
#: would not help soon (the reactor checked them at start, so they changed since).
EXIT_CREDENTIALS = 3


class Writes(Protocol):
    """Where a frame is written: a binary file or an asyncio stream writer."""

    def write(self, data: bytes, /) -> object: ...


def write_frame(out: Writes, message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(body)) + body)


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame of a blocking stream; EOFError at its end."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    body = stream.read(_LENGTH.unpack(head)[0])
    return pickle.loads(body)


async def read_frame_async(stream: asyncio.StreamReader) -> Any:
    """The next frame of ``stream``; ``asyncio.IncompleteReadError`` at its end."""
    head = await stream.readexactly(_LENGTH.size)
    return pickle.loads(await stream.readexactly(_LENGTH.unpack(head)[0]))


# -- the child's side --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Start:
    """What every child's start frame carries, beside what it is to do."""

    log_level: str = "info"
    log_format: str = "logfmt"
    #: seconds between two frames at most (:data:`HEARTBEAT_S`)
    heartbeat_s: float = HEARTBEAT_S
    #: niceness added to the reactor's (:data:`NICE`)
    nice: int = NICE


S = TypeVar("S", bound=Start)


#: Seconds between two looks at a child's health (:class:`HealthReports`).
HEALTH_EVERY_S = 0.5


class HealthReports:
    """A child's ``("health", ...)`` frames: sent when the health changed, and at least
    every ``heartbeat_s`` (the reactor takes a child silent for :data:`SILENT_S` as hung)."""

    def __init__(self, out: IO[bytes], heartbeat_s: float) -> None:
        self.out = out
        self.heartbeat_s = heartbeat_s
        self._sent: object = None
        self._sent_at = float("-inf")

    def report(self, health: object) -> None:
        if health != self._sent or time.monotonic() - self._sent_at >= self.heartbeat_s:
            write_frame(self.out, ("health", health))
            self.out.flush()
            self._sent, self._sent_at = health, time.monotonic()

    async def every(self, look: Callable[[], object]) -> None:
        """Report ``look()`` every :data:`HEALTH_EVERY_S` (or heartbeat, if shorter)."""
        while True:
            self.report(look())
            await asyncio.sleep(min(HEALTH_EVERY_S, self.heartbeat_s))


async def after_burst(informer: Informer[KubeObject], seen: int, debounce_s: float) -> int:
    """Wait for the informer to change after generation ``seen``, then ``debounce_s`` more
    for the rest of the burst; the generation to read (in a child, and in the reactor's
    own process with ``reactor.secretlink.InlineSecrets``)."""
    await informer.changed(seen)
    await asyncio.sleep(debounce_s)
    return informer.generation


async def stdin_closed() -> None:
    """Returns once stdin ends: the reactor is gone. A daemon thread reads it, so an
    exit for another reason never waits for it."""
    loop = asyncio.get_running_loop()
    closed = asyncio.Event()

    def read() -> None:
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(closed.set)

    threading.Thread(target=read, name="fleetwatch-stdin", daemon=True).start()
    await closed.wait()


async def serve_until_closed(work: dict[str, Coroutine[Any, Any, None]]) -> None:
    """Run ``work`` (task name -> coroutine) until stdin ends (the reactor is gone) or a
    task raises (a bug: raised here, logged by :func:`child_main`); then cancel it all."""
    closed = asyncio.ensure_future(stdin_closed())
    tasks = [asyncio.create_task(coro, name=name) for name, coro in work.items()]
    try:
        done, _ = await asyncio.wait([closed, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not closed:
                task.result()
    finally:
        for task in (closed, *tasks):
            task.cancel()
        await asyncio.gather(closed, *tasks, return_exceptions=True)


def child_main(
    module: str,
    start_type: type[S],
    serve: Callable[[S, IO[bytes]], Coroutine[Any, Any, int]],
    what: str,
) -> int:
    """A child's ``main``: its start frame read (anything else refused in a sentence),
    its log and niceness set, ``serve`` run until stdin ends; the exit status."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not break a frame
    try:
        start = read_frame(sys.stdin.buffer)
    except EOFError:  # the reactor stopped before it sent anything
        return 0
    except Exception:  # anything but the reactor's frame is refused alike
        start = None
    if not isinstance(start, start_type):
        print(f"{module}: started by the reactor only", file=sys.stderr)
        return 2
    setup_logging(start.log_level, start.log_format)
    if start.nice:
        os.nice(start.nice)  # lowering one's own priority needs no privilege
    try:
        return asyncio.run(serve(start, out))
    except BrokenPipeError:  # the reactor went while a frame was written
        return 0
    except Exception:
        log.exception("%s failed", what)
        return 1


# -- the reactor's side ------------------------------------------------------------------


class Supervised:
    """One child, started, read, and started again (module docstring).

    A subclass names its module and what it is (for the log), builds the start frame, and
    takes each frame it receives (:meth:`received`, on the event loop: a frame is a
    small piece of work, and the loop serves between two)."""

    #: ``python -m`` this module
    module = ""
    #: the child, as the log names it: "clusters from Secrets: the discovery process"
    label = ""

    def __init__(self) -> None:
        #: seconds of silence after which the child is taken as hung (:data:`SILENT_S`),
        #: and between two of its heartbeats at most
        self.silent_s = SILENT_S
        self.heartbeat_s = HEARTBEAT_S
        #: process ids of the children started (tests, and the log)
        self.pids: list[int] = []
        #: a child runs and has been sent its start
        self.running = False
        self._task: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None

    def __repr__(self) -> str:
        pid = self._proc.pid if self._proc is not None else None
        return f"{type(self).__name__}(pid={pid}, running={self.running})"

    def start_frame(self) -> Any:
        raise NotImplementedError

    def received(self, what: str, body: Any) -> None:
        raise NotImplementedError

    def ended(self) -> None:
        """The child ended (its successor starts from nothing)."""
        self.running = False

    async def __aenter__(self) -> Self:
        name = f"fleetwatch-{self.module.rsplit('.', 1)[-1]}"
        self._task = asyncio.create_task(self._supervise(), name=name)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _supervise(self) -> None:
        delay = RESTART_S
        while True:
            started = time.monotonic()
            try:
                code: int | str = await self._run_once()
            except Exception:  # a bug, or a process that wrote what is no frame: again
                log.exception("%s could not be read", self.label)
                code = "unreadable"
            self.ended()
            if time.monotonic() - started > STABLE_S:
                delay = RESTART_S
            if code == EXIT_CREDENTIALS:
                why = "the management cluster's credentials cannot be read"
            elif isinstance(code, int):
                why = f"exit status {code}"
            else:
                why = "killed: what it sent could not be read"
            log.warning("%s ended (%s); starting it again in %gs", self.label, why, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_MAX_S)

    async def _run_once(self) -> int:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            self.module,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=_child_env(),
        )
        self._proc = proc
        self.pids.append(proc.pid)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            write_frame(proc.stdin, self.start_frame())
            await proc.stdin.drain()
            self.running = True
            while True:
                try:
                    async with asyncio.timeout(self.silent_s):
                        what, body = await read_frame_async(proc.stdout)
                except asyncio.IncompleteReadError:
                    break
                except TimeoutError:
                    log.warning(
                        "%s (pid %d) sent nothing for %gs; killing it",
                        self.label,
                        proc.pid,
                        self.silent_s,
                    )
                    _kill(proc)
                    break
                self.received(what, body)
                await asyncio.sleep(0)  # a turn for the requests between two frames
            return await proc.wait()
        finally:
            await _stop(proc)
            self._proc = None


def log_settings() -> tuple[str, str]:
    """The level and format of this process's log (the root logger's handler), for a
    child to log as the reactor does."""
    root = logging.getLogger()
    level = logging.getLevelName(root.getEffectiveLevel()).lower()
    if level not in ("debug", "info", "warning", "error"):
        level = "info"
    json = any(isinstance(h.formatter, JsonFormatter) for h in root.handlers)
    return level, "json" if json else "logfmt"


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """End ``proc`` (its stdin closed, then killed after :data:`STOP_S`) and reap it."""
    if proc.returncode is not None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        async with asyncio.timeout(STOP_S):
            await proc.wait()
    except TimeoutError:
        _kill(proc)
        await proc.wait()
    except asyncio.CancelledError:
        _kill(proc)
        await proc.wait()
        raise


def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL, unless it has ended meanwhile."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _child_env() -> dict[str, str]:
    """This environment, with the directory this program runs from first on the path."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env
