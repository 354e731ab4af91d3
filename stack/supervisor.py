"""Run the whole Maka stack as supervised processes: what ``maka up`` and the e2e/fault tests use.

Two layers:

- :class:`Supervisor` - generic: starts :class:`ChildSpec` processes in order, waits (bounded) until
  each one's readiness check passes, forwards each process's output lines with a ``[name]`` prefix,
  reports a child that dies (:class:`StackEvent`) and restarts it when its spec allows, and stops
  them in reverse order (SIGTERM, bounded grace, then SIGKILL of the child's process group).
- :class:`Stack` - the Maka services on top: an embedded ``redis-server`` (unless a Redis URL is
  given), the Interaction service, the Capability broker, the MCP provider and the web surface,
  each with its ``MAKA_*`` environment, gRPC health checks (``grpc.health.v1``) and
  ``<state dir>/endpoints.json``.

Restart policy (DESIGN.md §5, RFC criterion 9): the Interaction service and the web surface are
stateless over Redis; a restarted broker begins a new Host epoch (closing old forms as
``host_restarted``); a restarted provider registers again; the embedded Redis keeps its data in an
append-only file. All of them are therefore restarted after an unexpected exit, with backoff and a
bounded number of attempts per minute; a restarted child keeps the port it first bound so the
others' targets stay valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import grpc.aio
import httpx
import redis.asyncio

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.broker.main import SUPERSEDED_EXIT_CODE
from services.core import healthcheck
from services.core.channels import open_channel
from services.mcp_provider.config import ConfigError, ServerConfig, load_config
from services.mcp_provider.oauth import generate_key_file
from stack.state_dir import Endpoints, write_endpoints
from surfaces.common.server_status import fetch_status

log = logging.getLogger("maka.stack.supervisor")

SUPERSEDED = "HOST_SUPERSEDED"
"""The stable code ``maka up`` prints (and the ``gave_up`` detail starts with) for a superseded broker."""
EventKind = Literal["started", "ready", "exited", "restarting", "gave_up", "stopped"]
MAX_LINE_BYTES = 1024 * 1024
"""Longest forwarded output line; a longer one is dropped (the next lines still flow)."""
LogSink = Callable[[str, str], None]
"""``sink(child_name, line)``: receives every output line of every child (without the newline)."""
ReadyCheck = Callable[[], Awaitable[bool]]


class StackError(RuntimeError):
    """The stack could not start (missing binary or config, a child exited or never became ready)."""


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


_output_closed = False


def _stderr_sink(name: str, line: str) -> None:
    """Write ``[name] line`` to stderr; once stderr is closed (the reader went away, e.g. ``| tee`` died
    on Ctrl-C) further lines are dropped so a write error never stops the pumps or the shutdown path."""
    global _output_closed
    if _output_closed:
        return
    try:
        sys.stderr.write(f"[{name}] {line}\n")
        sys.stderr.flush()
    except (BrokenPipeError, ValueError, OSError):  # EPIPE, closed file, or any other write failure
        _output_closed = True


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
        sink: LogSink = _stderr_sink,
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
        self._restart_backoff = restart_backoff
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
        assert process.stdout is not None
        assert process.stderr is not None
        child.pumps = [
            asyncio.create_task(self._pump(spec.name, process.stdout)),
            asyncio.create_task(self._pump(spec.name, process.stderr)),
        ]
        child.watcher = asyncio.create_task(self._watch(child, process))
        self._emit(StackEvent("started", spec.name, detail=f"pid {process.pid}"))

    async def _pump(self, name: str, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line longer than the reader limit: drop it, keep going
                continue
            if not raw:
                return
            self._sink(name, raw.decode("utf-8", "replace").rstrip("\r\n"))

    async def _await_ready(self, child: _Child) -> None:
        spec = child.spec
        process = child.process
        assert process is not None
        deadline = time.monotonic() + self._ready_timeout
        while True:
            if process.returncode is not None:
                raise StackError(f"{spec.name} exited with code {process.returncode} before it was ready")
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
        delay = min(self._restart_backoff * 2 ** (len(child.restart_times) - 1), 5.0)
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
        children = [self._children[name] for name in names]
        await asyncio.gather(*(self._terminate(child) for child in children))
        for child in children:
            self._emit(StackEvent("stopped", child.spec.name, code=child.process.returncode if child.process else None))
        for child in children:
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


# --- readiness checks -----------------------------------------------------------------------------


async def grpc_serving(target: str, *, timeout: float = 2.0) -> bool:
    """True when ``grpc.health.v1.Health/Check`` for the overall service (``""``) says SERVING."""
    return await healthcheck.serving(target, "", timeout=timeout)


async def list_tools(broker: str, *, timeout: float = 2.0) -> list[str]:
    """Qualified names (``SERVER:TOOL``) of every Tool the broker at ``broker`` lists (``ListTools``).

    Sends ``MAKA_CALLER_TOKEN`` as the bearer token when set. Raises ``grpc.aio.AioRpcError``.
    """
    async with open_channel(broker, token=os.environ.get("MAKA_CALLER_TOKEN") or None) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        response = await stub.ListTools(broker_pb2.ListToolsRequest(), timeout=timeout)
    return [tool.qualified_name for tool in response.tools]


async def servers_waiting_for_sign_in(broker: str, *, timeout: float = 2.0) -> set[str]:
    """MCP servers whose provider published a pending OAuth sign-in (broker ``ListSignIns``)."""
    async with open_channel(broker, token=os.environ.get("MAKA_CALLER_TOKEN") or None) as channel:
        stub = broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        response = await stub.ListSignIns(broker_pb2.ListSignInsRequest(), timeout=timeout)
    return {status.server for status in response.sign_ins if status.state == broker_pb2.SIGN_IN_STATE_REQUIRED}


async def http_ok(url: str, *, timeout: float = 2.0) -> bool:
    """True when ``GET url`` answers below 500."""
    async with httpx.AsyncClient(timeout=timeout) as client:
        try:
            response = await client.get(url)
        except httpx.HTTPError:
            return False
    return response.status_code < 500


async def redis_ping(url: str) -> bool:
    """True when Redis at ``url`` answers PING."""
    client = redis.asyncio.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        return bool(await client.ping())
    except (redis.exceptions.RedisError, OSError):
        return False
    finally:
        await client.aclose()


# --- one stack per state dir ----------------------------------------------------------------------

LOCK_FILE = "maka.lock"


class StackRunning(StackError):
    """Another ``maka up`` holds ``<state dir>/maka.lock``; ``pid`` is its process id (None if unknown)."""

    def __init__(self, state_dir: Path, pid: int | None) -> None:
        self.state_dir = state_dir
        self.pid = pid
        who = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"a stack already runs in {state_dir} ({who}); use it (maka call …) or pick another --state-dir"
        )


class StateDirLock:
    """An exclusive, non-blocking ``fcntl.flock`` on ``<state dir>/maka.lock`` held for a stack's life.

    ``acquire()`` creates the state dir if needed, takes the lock and writes this process's pid into
    the file; it raises :class:`StackRunning` (naming the holder's pid) when another process holds it,
    touching nothing else. The kernel drops the lock when the holder exits, even on ``kill -9``.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (see the class docstring). Raises :class:`StackRunning`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            raise StackRunning(self.path.parent, int(holder) if holder.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays; an unlocked file means no stack runs there)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StateDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# --- the Maka stack -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ports:
    """Loopback ports; 0 means ephemeral (the child writes the bound port to its port file)."""

    interaction: int = 50051
    broker: int = 50052
    provider: int = 50053
    """The MCP provider's gRPC health port."""
    web: int = 8765

    @classmethod
    def ephemeral(cls) -> Ports:
        """Every port chosen by the OS."""
        return cls(0, 0, 0, 0)

    @classmethod
    def parse(cls, text: str) -> Ports:
        """``"ephemeral"``, ``"default"`` or ``name=port,...`` (names: interaction, broker, provider, web).

        Raises ``ValueError`` naming the bad part.
        """
        if text in ("ephemeral", "0"):
            return cls.ephemeral()
        if text in ("default", ""):
            return cls()
        values: dict[str, int] = {}
        for part in text.split(","):
            name, sep, number = part.partition("=")
            name = name.strip()
            if not sep or name not in {"interaction", "broker", "provider", "web"}:
                raise ValueError(
                    f"bad port spec {part!r}: use ephemeral or name=port (interaction, broker, provider, web)"
                )
            if not number.strip().isdigit() or not 0 <= int(number) <= 65535:
                raise ValueError(f"bad port number in {part!r}")
            values[name] = int(number)
        return cls(**values)


SHORT_SOCKET_CHARS = 100
"""Unix socket paths must stay under ~107 bytes; longer state dirs get a socket under /tmp."""


METRICS_ENV = "MAKA_METRICS_LISTEN"
METRICS_SERVICES = ("interaction", "broker", "provider")
"""The children that serve Prometheus ``/metrics`` when ``maka up --metrics`` asks for it."""


def parse_metrics_ports(text: str) -> dict[str, int]:
    """``maka up --metrics`` spec: ``"ephemeral"`` (every service an OS-chosen port) or
    ``name=port,...`` (names: interaction, broker, provider; a missing or 0 port is ephemeral).

    Returns ``{service: port}`` (0 = ephemeral). Raises ``ValueError`` naming the bad part.
    """
    ports = dict.fromkeys(METRICS_SERVICES, 0)
    if text in ("ephemeral", "0", ""):
        return ports
    for part in text.split(","):
        name, sep, number = part.partition("=")
        name = name.strip()
        if not sep or name not in METRICS_SERVICES:
            raise ValueError(
                f"bad metrics port spec {part!r}: use ephemeral or name=port (interaction, broker, provider)"
            )
        if not number.strip().isdigit() or not 0 <= int(number) <= 65535:
            raise ValueError(f"bad metrics port number in {part!r}")
        ports[name] = int(number)
    return ports


def free_port() -> int:
    """A loopback TCP port the OS just handed out (closed again for the child to bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _python_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(METRICS_ENV, None)  # one inherited metrics port would make every child bind the same port
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")  # `python` in mcp.json = this interpreter
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _read_port(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


class ConfigInvalid(StackError):
    """The ``mcpServers`` file has problems: ``problems`` holds one line each (no values)."""

    def __init__(self, config_path: Path, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(f"{config_path}: {problem}" for problem in self.problems))


def _check_config(config_path: Path) -> list[ServerConfig]:
    """The file's servers, or :class:`ConfigInvalid` (checked before anything starts: one line per
    problem instead of a provider that exits before it is ready)."""
    if not config_path.is_file():
        raise StackError(f"MCP config {config_path} not found (an mcpServers JSON file, e.g. examples/mcp.json)")
    try:
        return load_config(config_path)
    except ConfigError as error:
        raise ConfigInvalid(config_path, [str(problem) for problem in error.problems]) from None


class Stack:
    """The Maka stack as processes: ``await start()`` → :class:`Endpoints`; ``await stop()``.

    ``config_path`` is the ``mcpServers`` JSON for the MCP provider; ``state_dir`` holds
    ``endpoints.json``, port files, and the embedded Redis's data and socket. With ``redis_url``
    (or ``MAKA_REDIS_URL`` given by the caller) no Redis is started. ``web=False`` skips the web
    surface. Children are run with ``python`` (this interpreter) ``-m services.<x>.main``.

    Fault tests use :meth:`kill` (SIGKILL, then supervised restart) and :meth:`restart`; events
    are observable through :meth:`subscribe` / :attr:`history`.
    """

    INTERACTION = "interaction"
    BROKER = "broker"
    PROVIDER = "provider"
    WEB = "web"
    REDIS = "redis"

    def __init__(
        self,
        config_path: Path,
        state_dir: Path,
        *,
        ports: Ports | None = None,
        redis_url: str | None = None,
        redis_mode: str = "standalone",
        host_id: str = "local",
        web: bool = True,
        log_level: str = "INFO",
        sink: LogSink = _stderr_sink,
        ready_timeout: float = 60.0,
        stop_grace: float = 10.0,
        tools_timeout: float = 30.0,
        extra_env: Mapping[str, str] | None = None,
        metrics: Mapping[str, int] | None = None,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        restart_backoff: float = 0.2,
    ) -> None:
        self.config_path = config_path.resolve()
        self.state_dir = state_dir.resolve()
        self.ports = ports if ports is not None else Ports()
        self.host_id = host_id
        self.web_enabled = web
        self.log_level = log_level
        self.redis_url = redis_url or ""
        self.redis_mode = redis_mode if redis_url else "standalone"
        """How the Interaction service reads ``redis_url`` (``MAKA_REDIS_MODE``); the private Redis is standalone."""
        self._embedded_redis = not redis_url
        self._extra_env = {k: v for k, v in (extra_env or {}).items() if k != METRICS_ENV}
        self.metrics = dict(metrics) if metrics is not None else None
        """``{service: port}`` (0 = ephemeral) of the ``/metrics`` endpoints to serve; None = none."""
        self.metrics_bound: dict[str, int] = {}
        """The metrics port given to each service (kept across restarts)."""
        self._sink = sink
        self.tools_timeout = tools_timeout
        """Seconds ``start()`` waits for every configured MCP server's Tools to be registered."""
        self._signing_in: set[str] = set()
        """Configured MCP servers last seen waiting for an OAuth sign-in (ready without their Tools)."""
        self._socket_dir: Path | None = None
        self.supervisor = Supervisor(
            sink=sink,
            ready_timeout=ready_timeout,
            stop_grace=stop_grace,
            max_restarts=max_restarts,
            restart_window=restart_window,
            restart_backoff=restart_backoff,
        )
        self.supervisor.on_change = self._write_endpoints
        self.bound: dict[str, int] = {}
        """The port each child bound (by child name), known once it is ready."""
        self.endpoints: Endpoints | None = None

    # --- public API --------------------------------------------------------------------------

    async def start(self) -> Endpoints:
        """Start Redis (embedded default), interaction, broker, web, then the provider (OAuth redirect: the web port).

        Returns the endpoints (also written to ``<state_dir>/endpoints.json``) once every child is
        ready: gRPC health SERVING, web answering HTTP, Redis answering PING. Raises
        :class:`StackError` (after stopping what did start) on a missing ``redis-server`` or
        config, or when a child exits or is not ready in time.
        """
        _check_config(self.config_path)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "run").mkdir(exist_ok=True)
        try:
            if self._embedded_redis:
                await self.supervisor.start(self._redis_spec())
            await self.supervisor.start(self._interaction_spec())
            await self.supervisor.start(self._broker_spec())
            # The web surface reads sign-ins and the server status from the broker, and its bound port is
            # the provider's OAuth redirect URI (kept across restarts): broker, then web, then the provider.
            if self.web_enabled:
                await self.supervisor.start(self._web_spec())
            await self.supervisor.start(self._provider_spec())
        except BaseException:
            await self.stop()
            raise
        for name in sorted(await self.wait_for_tools()):
            if name in self._signing_in:
                self._sink(
                    "stack", f"MCP server {name!r} needs a sign-in: open the web page or `maka auth login {name}`"
                )
            else:
                self._sink("stack", f"MCP server {name!r} is not connected yet; `maka status` shows why")
        return await self._write_endpoints()

    async def wait_for_tools(self) -> set[str]:
        """Wait (at most ``tools_timeout`` s) until the broker lists Tools of every enabled MCP server
        (after start, or after a broker/provider restart), or the provider reports that server as failed
        or waiting for sign-in (waiting longer would only delay the ready line). Returns the servers
        without registered Tools (empty = all registered); never raises for an unreachable broker (it
        counts as nothing listed)."""
        try:
            servers = {s.name for s in load_config(self.config_path) if not s.disabled}
        except (ConfigError, OSError):
            servers = set()
        missing = set(servers)
        deadline = time.monotonic() + self.tools_timeout
        while missing and time.monotonic() < deadline:
            stuck: set[str] = set()
            try:
                tools = await list_tools(self.address(self.BROKER))
                status = await fetch_status(self.address(self.BROKER))
                stuck = {
                    s.name
                    for s in status.servers
                    if s.state in (broker_pb2.SERVER_STATE_FAILED, broker_pb2.SERVER_STATE_WAITING_FOR_SIGN_IN)
                }
            except grpc.aio.AioRpcError:
                tools = []
            missing = servers - {name.partition(":")[0] for name in tools}
            with contextlib.suppress(grpc.aio.AioRpcError):
                self._signing_in = await servers_waiting_for_sign_in(self.address(self.BROKER)) if missing else set()
            stuck |= self._signing_in  # a sign-in needs a person: the stack is ready without those Tools
            if missing and not missing <= stuck:
                await asyncio.sleep(0.1)  # polling a remote listing, bounded by the deadline
            elif missing:
                break
        return missing

    @property
    def oauth_redirect_uri(self) -> str:
        """The web surface's ``/oauth/callback`` (``maka auth login`` listens there when there is no web)."""
        return f"http://127.0.0.1:{self.bound.get(self.WEB) or self.ports.web or self._callback_port()}/oauth/callback"

    def _callback_port(self) -> int:
        """A loopback port for the OAuth redirect when the web port is ephemeral and no web runs: chosen
        free once and kept in the state dir, so the URI registered with authorization servers stays valid
        across restarts (never a fixed port another process may hold)."""
        path = self.state_dir / "oauth-callback.port"
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text().strip())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{port}\n")
        return port

    def _oauth_env(self) -> dict[str, str]:
        key_file = self.state_dir / "oauth.key"
        generate_key_file(key_file)
        return {
            "MAKA_OAUTH_REDIRECT_URI": self.oauth_redirect_uri,
            "MAKA_OAUTH_KEY_FILE": str(key_file),
            "MAKA_OAUTH_TOKEN_DIR": str(self.state_dir / "oauth"),
        }

    def reload_config(self) -> bool:
        """Send SIGHUP to the MCP provider (it re-reads and applies its config; ``maka reload``).
        False when no provider process runs."""
        pid = self.supervisor.pid(self.PROVIDER)
        if pid is None:
            return False
        os.kill(pid, signal.SIGHUP)
        return True

    async def stop(self) -> None:
        """Drain and stop every child: web, provider, broker, interaction, redis."""
        await self.supervisor.stop(order=(self.WEB, self.PROVIDER, self.BROKER, self.INTERACTION, self.REDIS))
        (self.state_dir / "endpoints.json").unlink(missing_ok=True)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def kill(self, name: str) -> None:
        """SIGKILL child ``name`` (``interaction``, ``broker``, ``provider``, ``web``, ``redis``)."""
        self.supervisor.kill(name)

    async def restart(self, name: str) -> None:
        """Gracefully restart child ``name`` on the same port and wait until it is ready."""
        await self.supervisor.restart(name)

    async def restart_host(self) -> None:
        """A rolling restart of the Host: SIGTERM broker and provider together (one pod's containers),
        let them drain (``MAKA_DRAIN_SECONDS``), then start them again and wait until both are ready."""
        await self.supervisor.restart_together((self.BROKER, self.PROVIDER))

    def subscribe(self) -> asyncio.Queue[StackEvent]:
        """A queue of every later :class:`StackEvent` (exits, restarts, readiness)."""
        return self.supervisor.subscribe()

    @property
    def history(self) -> list[StackEvent]:
        """Every event so far."""
        return self.supervisor.history

    def address(self, name: str) -> str:
        """``127.0.0.1:<port>`` of a gRPC child, or the web base URL for ``web``."""
        port = self.bound[name]
        return f"http://127.0.0.1:{port}" if name == self.WEB else f"127.0.0.1:{port}"

    # --- child specs -------------------------------------------------------------------------

    def _port_file(self, name: str) -> Path:
        return self.state_dir / "run" / f"{name}.port"

    def _pinned_port(self, name: str, configured: int) -> int:
        """The configured port, or after a first launch the port that launch bound (restarts keep it)."""
        return self.bound.get(name, configured)

    def _grpc_spec(self, name: str, module: str, configured: int, env: Callable[[], dict[str, str]]) -> ChildSpec:
        port_file = self._port_file(name)

        async def prepare(spec: ChildSpec, attempt: int) -> None:
            port_file.unlink(missing_ok=True)
            port = self._pinned_port(name, configured)
            spec.env = _python_env(
                {
                    "MAKA_LISTEN": f"127.0.0.1:{port}",
                    "MAKA_PORT_FILE": str(port_file),
                    "MAKA_HOST_ID": self.host_id,
                    "MAKA_LOG_LEVEL": self.log_level,
                    **env(),
                    **self._extra_env,
                    **self._metrics_env(name),
                }
            )

        async def ready() -> bool:
            port = _read_port(port_file)
            if port is None or not await grpc_serving(f"127.0.0.1:{port}"):
                return False
            self.bound[name] = port
            return True

        return ChildSpec(name, [sys.executable, "-m", module], ready=ready, prepare=prepare)

    def _metrics_env(self, name: str) -> dict[str, str]:
        if self.metrics is None or name not in self.metrics:
            return {}
        port = self.metrics_bound.get(name) or self.metrics[name] or free_port()
        self.metrics_bound[name] = port
        return {METRICS_ENV: f"127.0.0.1:{port}"}

    def metrics_urls(self) -> dict[str, str]:
        """``{service: "http://127.0.0.1:P/metrics"}`` of every service serving metrics (empty when off)."""
        return {name: f"http://127.0.0.1:{port}/metrics" for name, port in self.metrics_bound.items()}

    def _interaction_spec(self) -> ChildSpec:
        return self._grpc_spec(
            self.INTERACTION,
            "services.interaction.main",
            self.ports.interaction,
            lambda: {"MAKA_REDIS_URL": self.redis_url, "MAKA_REDIS_MODE": self.redis_mode},
        )

    def _broker_spec(self) -> ChildSpec:
        spec = self._grpc_spec(
            self.BROKER,
            "services.broker.main",
            self.ports.broker,
            lambda: {"MAKA_INTERACTION_TARGET": self.address(self.INTERACTION)},
        )
        spec.final_exits = {
            SUPERSEDED_EXIT_CODE: f"{SUPERSEDED}: the broker exited {SUPERSEDED_EXIT_CODE}: another broker began a"
            f" newer epoch of Host {self.host_id!r} on the same Redis (a second `maka up` or pod with this host"
            " id); it is not restarted, which would fence that one back"
        }
        return spec

    def _provider_spec(self) -> ChildSpec:
        return self._grpc_spec(
            self.PROVIDER,
            "services.mcp_provider.main",
            self.ports.provider,
            lambda: {
                "MAKA_BROKER_TARGET": self.address(self.BROKER),
                "MAKA_MCP_CONFIG": str(self.config_path),
                **self._oauth_env(),
            },
        )

    def _web_spec(self) -> ChildSpec:
        port_file = self._port_file(self.WEB)

        async def prepare(spec: ChildSpec, attempt: int) -> None:
            port_file.unlink(missing_ok=True)
            port = self._pinned_port(self.WEB, self.ports.web)
            spec.env = _python_env(
                {
                    "MAKA_INTERACTION_TARGET": self.address(self.INTERACTION),
                    "MAKA_BROKER_TARGET": self.address(self.BROKER) if self.BROKER in self.bound else "",
                    "MAKA_WEB_LISTEN": f"127.0.0.1:{port}",
                    "MAKA_WEB_PORT_FILE": str(port_file),
                    "MAKA_LOG_LEVEL": self.log_level,
                    **self._extra_env,
                }
            )

        async def ready() -> bool:
            port = _read_port(port_file)
            if port is None or not await http_ok(f"http://127.0.0.1:{port}/"):
                return False
            self.bound[self.WEB] = port
            return True

        return ChildSpec(self.WEB, [sys.executable, "-m", "surfaces.web.main"], ready=ready, prepare=prepare)

    def _redis_spec(self) -> ChildSpec:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StackError(
                "redis-server is not installed: install it (apt-get install redis-server, or `make setup`) "
                "or point at a running Redis with --redis-url / MAKA_REDIS_URL"
            )
        data_dir = self.state_dir / "redis"
        data_dir.mkdir(parents=True, exist_ok=True)
        socket_path = self.state_dir / "redis.sock"
        if len(str(socket_path)) > SHORT_SOCKET_CHARS:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="maka-", dir="/tmp"))
            socket_path = self._socket_dir / "redis.sock"
        self.redis_url = f"unix://{socket_path}"
        argv = [
            binary,
            "--port", "0",
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--loglevel", "warning",
        ]  # fmt: skip

        async def prepare(spec: ChildSpec, attempt: int) -> None:
            socket_path.unlink(missing_ok=True)

        async def ready() -> bool:
            return socket_path.exists() and await redis_ping(self.redis_url)

        return ChildSpec(self.REDIS, argv, ready=ready, prepare=prepare)

    async def _write_endpoints(self) -> Endpoints:
        endpoints = Endpoints(
            interaction=self.address(self.INTERACTION),
            broker=self.address(self.BROKER),
            web=self.address(self.WEB) if self.WEB in self.bound else "",
            redis_url=self.redis_url,
            host_id=self.host_id,
            pids=self.supervisor.pids(),
            metrics=self.metrics_urls(),
            provider=self.address(self.PROVIDER) if self.PROVIDER in self.bound else "",
            config=str(self.config_path),
        )
        write_endpoints(self.state_dir, endpoints)
        self.endpoints = endpoints
        return endpoints
