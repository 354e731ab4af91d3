"""The generic process supervisor behind ``maka up``, the e2e/fault tests and the benchmarks.

:class:`Supervisor` starts :class:`ChildSpec` processes in order, waits (bounded) until each one's
readiness check passes, forwards each process's output lines to a log sink (by default ``[name] line``
on stderr), reports a child that dies (:class:`StackEvent`) and restarts it when its spec allows, and
stops them in reverse order (SIGTERM, bounded grace, then SIGKILL of the child's process group). It runs
any program; the Maka services on top (their ``MAKA_*`` environment, ports and readiness probes) are
:class:`stack.topology.Stack`'s.

Restart policy (docs/design.md#restart-and-reconnect, RFC criterion 9): the Interaction service and the web surface are
stateless over Redis; a restarted broker begins a new Host epoch (closing old forms as
``host_restarted``); a restarted provider registers again; the embedded Redis keeps its data in an
append-only file. All of them are therefore restarted after an unexpected exit, with backoff and a
bounded number of attempts per minute; a restarted child keeps the port it first bound so the
others' targets stay valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from services.core.backoff import Backoff
from stack.errors import StackError

log = logging.getLogger("maka.stack.supervisor")

EventKind = Literal["started", "ready", "exited", "restarting", "gave_up", "stopped"]
MAX_LINE_BYTES = 1024 * 1024
"""Longest forwarded output line; a longer one is dropped (the next lines still flow)."""
TAIL_LINES = 50
"""Output lines of a child's current launch kept to explain an exit before it was ready."""
LogSink = Callable[[str, str], None]
"""``sink(child_name, line)``: receives every output line of every child (without the newline)."""
ReadyCheck = Callable[[], Awaitable[bool]]


@dataclass(frozen=True)
class StackEvent:
    """Something that happened to a child: ``kind``, child ``name``, exit ``code`` when it exited."""

    kind: EventKind
    name: str
    code: int | None = None
    detail: str = ""


@dataclass
class ChildSpec:
    """How to run one child process.

    ``argv``/``env`` may be rebuilt for a restart by ``prepare`` (called before every launch, with
    the attempt number starting at 0), e.g. to pin the port the first launch bound.
    """

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    ready: ReadyCheck | None = None
    """Readiness check polled after launch until it returns True (None: ready once launched)."""
    restart: bool = True
    """Restart after an unexpected exit (only once the stack is up)."""
    prepare: Callable[[ChildSpec, int], Awaitable[None]] | None = None
    cwd: Path | None = None
    final_exits: Mapping[int, str] = field(default_factory=lambda: dict[int, str]())
    """Exit codes that mean "do not restart": the child is given up at once (event ``gave_up``) with
    this text as its ``detail`` (e.g. a superseded broker, which a restart would make fence back)."""


@dataclass
class _Child:
    spec: ChildSpec
    process: asyncio.subprocess.Process | None = None
    watcher: asyncio.Task[None] | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=lambda: list[asyncio.Task[None]]())
    launches: int = 0
    restart_times: list[float] = field(default_factory=lambda: list[float]())
    expected_exit: bool = False
    was_ready: bool = False
    tail: deque[str] = field(default_factory=lambda: deque[str](maxlen=TAIL_LINES))


class ChildExited(StackError):
    """A child exited before it was ready: its ``name``, exit ``code``, last output lines (``output``) and
    the last meaningful one (``cause``: an error log line, a traceback's exception, or the last line), which
    the message ends with."""

    def __init__(self, name: str, code: int, output: Sequence[str]) -> None:
        self.name = name
        self.code = code
        self.output = tuple(output)
        self.cause = last_cause(self.output)
        super().__init__(
            f"{name} exited with code {code} before it was ready" + (f": {self.cause}" if self.cause else "")
        )


_ERROR_LEVELS = frozenset({"error", "critical", "fatal"})
_EXCEPTION_PREFIX = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): ")
_TRACEBACK_NOISE = ("Traceback (most recent call last)", "During handling of", "The above exception")


def last_cause(lines: Iterable[str]) -> str:
    """The last meaningful line of a child's output: a JSON log line at error level (its ``event`` and
    ``error``), else the last plain line that is not part of a traceback's frames (``RuntimeError: x`` →
    ``x``); JSON lines below error level are skipped. Empty when there is none."""
    for raw in reversed(list(lines)):
        line = raw.strip()
        if not line or raw[:1].isspace() or line.startswith(_TRACEBACK_NOISE):
            continue
        if line.startswith("{"):
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if isinstance(entry, dict):
                if str(entry.get("level", "")).lower() not in _ERROR_LEVELS:
                    continue
                detail = entry.get("error") or entry.get("detail")
                return str(entry.get("event", "")) + (f": {detail}" if detail else "")
        return _EXCEPTION_PREFIX.sub("", line, count=1)
    return ""


class StderrSink:
    """A :data:`LogSink` writing ``[name] line`` to stderr; once stderr is closed (the reader went away,
    e.g. ``| tee`` died on Ctrl-C) further lines are dropped so a write error never stops the pumps or
    the shutdown path (``closed`` says so)."""

    def __init__(self) -> None:
        self.closed = False

    def __call__(self, name: str, line: str) -> None:
        if self.closed:
            return
        try:
            sys.stderr.write(f"[{name}] {line}\n")
            sys.stderr.flush()
        except (BrokenPipeError, ValueError, OSError):  # EPIPE, closed file, or any other write failure
            self.closed = True


stderr_sink = StderrSink()
"""The process's one stderr sink (the default of :class:`Supervisor` and :class:`stack.topology.Stack`)."""


def _safe_sink(sink: LogSink) -> LogSink:
    """``sink`` that never raises: a failing sink must not end a pump (the child's pipe would fill)."""

    def call(name: str, line: str) -> None:
        with contextlib.suppress(Exception):
            sink(name, line)

    return call


PR_SET_PDEATHSIG = 1
"""``prctl`` option (linux/prctl.h): the signal a process gets when its parent thread dies."""

_DIE_WITH_PARENT = f"""
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, int(signal.SIGTERM), 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    sys.exit(143)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as error:
    sys.exit(f"cannot start {{sys.argv[2]}}: {{error}}")
"""
"""Runs before a child's program on Linux: asks for SIGTERM on the supervisor's death, then ``exec``s
the program (same pid; the setting survives ``exec``). It exits 143 when the supervisor already died."""


def die_with_parent(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped so the child gets SIGTERM when this process dies, even by ``kill -9`` (Linux
    ``prctl(PR_SET_PDEATHSIG)``); unchanged elsewhere.

    A wrapper that ``exec``s rather than a ``preexec_fn``: that would force a plain ``fork()`` of this
    multi-threaded process (running gRPC's fork handlers) instead of ``vfork``. The kernel ties the
    setting to the thread that forked the child: run the supervisor's event loop in a thread that
    outlives its children (the main thread for ``maka up``).
    """
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-I", "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv]


class Supervisor:
    """Start, watch, restart and stop child processes (see the module docstring).

    ``ready_timeout`` (seconds) bounds each child's readiness wait; ``stop_grace`` (seconds) is how
    long a child gets after SIGTERM before SIGKILL; at most ``max_restarts`` restarts happen within
    ``restart_window`` seconds before the child is given up (event ``gave_up``).
    """

    def __init__(
        self,
        *,
        sink: LogSink = stderr_sink,
        ready_timeout: float = 60.0,
        stop_grace: float = 10.0,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        restart_backoff: float = 0.2,
    ) -> None:
        self._sink = _safe_sink(sink)
        self._ready_timeout = ready_timeout
        self._stop_grace = stop_grace
        self._max_restarts = max_restarts
        self._restart_window = restart_window
        # Children restart on a fixed schedule (no jitter: one supervisor, no herd to spread).
        self._restart_delays = Backoff(initial=restart_backoff, maximum=max(5.0, restart_backoff), jitter=False)
        self._children: dict[str, _Child] = {}
        self._order: list[str] = []
        self._subscribers: list[asyncio.Queue[StackEvent]] = []
        self._stopping = False
        self._restart_tasks: set[asyncio.Task[None]] = set()
        self.history: list[StackEvent] = []
        """Every event so far, oldest first."""
        self.on_change: Callable[[], Awaitable[object]] | None = None
        """Called after a child was restarted and is ready again (e.g. to rewrite endpoints.json)."""

    # --- observation -------------------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue[StackEvent]:
        """A queue receiving every later event."""
        queue: asyncio.Queue[StackEvent] = asyncio.Queue()
        self._subscribers.append(queue)
        return queue

    def _emit(self, event: StackEvent) -> None:
        self.history.append(event)
        log.info("child_" + event.kind, extra={"child": event.name, "code": event.code})
        for queue in self._subscribers:
            queue.put_nowait(event)

    def pid(self, name: str) -> int | None:
        """The live process id of child ``name`` (None when not running)."""
        child = self._children.get(name)
        if child is None or child.process is None or child.process.returncode is not None:
            return None
        return child.process.pid

    def pids(self) -> dict[str, int]:
        """Process ids of every running child."""
        return {name: pid for name in self._order if (pid := self.pid(name)) is not None}

    @property
    def names(self) -> list[str]:
        """Children in start order."""
        return list(self._order)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self, spec: ChildSpec) -> None:
        """Launch ``spec`` and wait until it is ready.

        Raises :class:`StackError` when it exits or is not ready within ``ready_timeout``.
        """
        if spec.name in self._children:
            raise ValueError(f"child {spec.name!r} already exists")
        child = _Child(spec)
        self._children[spec.name] = child
        self._order.append(spec.name)
        await self._launch(child)
        await self._await_ready(child)

    async def _launch(self, child: _Child) -> None:
        spec = child.spec
        if spec.prepare is not None:
            await spec.prepare(spec, child.launches)
        child.expected_exit = False
        if shutil.which(spec.argv[0]) is None:
            raise StackError(f"cannot start {spec.name}: {spec.argv[0]} not found or not executable")
        try:
            process = await asyncio.create_subprocess_exec(
                *die_with_parent(spec.argv),  # ...and they die with us, even on kill -9
                env=dict(spec.env),
                cwd=spec.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # Ctrl-C reaches only us; we drain the children in order
                limit=MAX_LINE_BYTES,
            )
        except OSError as error:
            raise StackError(f"cannot start {spec.name}: {error}") from error
        child.process = process
        child.launches += 1
        child.tail.clear()
        assert process.stdout is not None
        assert process.stderr is not None
        child.pumps = [
            asyncio.create_task(self._pump(child, process.stdout)),
            asyncio.create_task(self._pump(child, process.stderr)),
        ]
        child.watcher = asyncio.create_task(self._watch(child, process))
        self._emit(StackEvent("started", spec.name, detail=f"pid {process.pid}"))

    async def _pump(self, child: _Child, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line longer than the reader limit: drop it, keep going
                continue
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            child.tail.append(line)
            self._sink(child.spec.name, line)

    async def _await_ready(self, child: _Child) -> None:
        spec = child.spec
        process = child.process
        assert process is not None
        deadline = time.monotonic() + self._ready_timeout
        while True:
            if process.returncode is not None:
                # its last lines explain why (e.g. a port already bound): let the pipes drain (bounded: a
                # grandchild may still hold them open)
                if child.pumps:
                    await asyncio.wait(child.pumps, timeout=1.0)
                raise ChildExited(spec.name, process.returncode, child.tail)
            if spec.ready is None or await _safely(spec.ready):
                child.was_ready = True
                self._emit(StackEvent("ready", spec.name))
                return
            if time.monotonic() > deadline:
                raise StackError(f"{spec.name} was not ready within {self._ready_timeout:.0f}s")
            waiter = asyncio.ensure_future(process.wait())
            await asyncio.wait({waiter}, timeout=0.05)
            waiter.cancel()

    async def _watch(self, child: _Child, process: asyncio.subprocess.Process) -> None:
        code = await process.wait()
        await asyncio.gather(*child.pumps, return_exceptions=True)
        if child.expected_exit or self._stopping:
            return
        self._emit(StackEvent("exited", child.spec.name, code=code))
        if code in child.spec.final_exits:
            self._emit(StackEvent("gave_up", child.spec.name, code=code, detail=child.spec.final_exits[code]))
            return
        if not child.spec.restart or not child.was_ready:  # a child that never came up fails start()
            return
        task = asyncio.create_task(self._restart_after_crash(child))
        self._restart_tasks.add(task)
        task.add_done_callback(self._restart_tasks.discard)

    async def _restart_after_crash(self, child: _Child) -> None:
        now = time.monotonic()
        child.restart_times = [t for t in child.restart_times if now - t < self._restart_window]
        if len(child.restart_times) >= self._max_restarts:
            self._emit(StackEvent("gave_up", child.spec.name, detail=f"{self._max_restarts} restarts"))
            return
        child.restart_times.append(now)
        delay = self._restart_delays.delay(len(child.restart_times))
        self._emit(StackEvent("restarting", child.spec.name, detail=f"in {delay:.1f}s"))
        await asyncio.sleep(delay)  # backoff between attempts, not synchronisation
        if self._stopping:
            return
        try:
            await self._launch(child)
            await self._await_ready(child)
        except StackError as error:
            self._sink(child.spec.name, f"restart failed: {error}")
            if child.process is not None and child.process.returncode is None:
                _signal_group(child.process, signal.SIGKILL)  # not ready in time: count it as a crash
            return  # its watcher reports the exit and tries again within the budget
        if self.on_change is not None:
            await self.on_change()

    async def restart(self, name: str) -> None:
        """Stop child ``name`` gracefully, launch it again and wait until it is ready."""
        child = self._children[name]
        await self._terminate(child)
        self._emit(StackEvent("stopped", name))
        await self._launch(child)
        await self._await_ready(child)
        if self.on_change is not None:
            await self.on_change()

    async def restart_together(self, names: Sequence[str]) -> None:
        """SIGTERM every child in ``names`` at once (as Kubernetes stops the containers of one pod),
        wait for all to exit (each bounded by ``stop_grace``), then launch them again in the given
        order, each ready before the next."""
        await self.stop_together(names)
        await self.start_again(names)

    async def stop_together(self, names: Sequence[str]) -> None:
        """SIGTERM every child in ``names`` at once and wait for all to exit (each bounded by
        ``stop_grace``); they stay stopped (a scale-in) until :meth:`start_again`."""
        children = [self._children[name] for name in names]
        await asyncio.gather(*(self._terminate(child) for child in children))
        for child in children:
            self._emit(StackEvent("stopped", child.spec.name, code=child.process.returncode if child.process else None))

    async def start_again(self, names: Sequence[str]) -> None:
        """Launch stopped children ``names`` again in the given order (on their ports), each ready before
        the next. Raises :class:`StackError` as :meth:`start` does."""
        for name in names:
            child = self._children[name]
            await self._launch(child)
            await self._await_ready(child)
        if self.on_change is not None:
            await self.on_change()

    def kill(self, name: str) -> None:
        """SIGKILL child ``name`` and its process group, as a crash would (fault tests).

        The supervisor then reports it (``exited``) and restarts it when its spec allows.
        """
        child = self._children[name]
        if child.process is not None and child.process.returncode is None:
            _signal_group(child.process, signal.SIGKILL)

    async def stop(self, order: Sequence[str] = ()) -> None:
        """Stop every child: those named in ``order`` first, in that order, then the rest in reverse
        start order (each: SIGTERM, ``stop_grace``, then SIGKILL of its process group)."""
        self._stopping = True
        for task in list(self._restart_tasks):
            task.cancel()
        await asyncio.gather(*self._restart_tasks, return_exceptions=True)
        names = [n for n in order if n in self._children]
        names += [n for n in reversed(self._order) if n not in names]
        for name in names:
            child = self._children[name]
            if child.process is not None and child.process.returncode is None:
                await self._terminate(child)
                self._emit(StackEvent("stopped", name, code=child.process.returncode))

    async def _terminate(self, child: _Child) -> None:
        process = child.process
        if process is None:
            return
        child.expected_exit = True
        if process.returncode is None:
            _signal_group(process, signal.SIGTERM)
            try:
                async with asyncio.timeout(self._stop_grace):
                    await process.wait()
            except TimeoutError:
                _signal_group(process, signal.SIGKILL)
                await process.wait()
        _signal_group(process, signal.SIGKILL)  # leftovers of the group (e.g. a stdio MCP server)
        if child.watcher is not None:
            await asyncio.gather(child.watcher, return_exceptions=True)


def _signal_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _safely(check: ReadyCheck) -> bool:
    try:
        return await check()
    except Exception:
        return False
