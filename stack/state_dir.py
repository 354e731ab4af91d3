"""The state dir of a stack: ``<state dir>/endpoints.json`` (where it runs) and ``maka.lock`` (one stack per dir).

``maka up`` writes ``endpoints.json`` (by default its gRPC addresses are ``unix:///abs/.state/sock/NAME.sock``
targets, :mod:`stack.access`); every other command finds the stack through ``--state-dir`` or
``MAKA_STATE_DIR`` (default ``./.state``; :mod:`surfaces.common.target`). Shape::

    {"interaction": "127.0.0.1:50051", "broker": "127.0.0.1:50052",
     "web": "http://127.0.0.1:8765", "redis_url": "unix:///.../redis.sock",
     "host_id": "local", "pids": {"interaction": 123, ...},
     "provider": "127.0.0.1:50053", "config": "/abs/mcp.json",
     "mcp": "http://127.0.0.1:8766/mcp", "tokens": "/abs/.state/tokens.json",
     "metrics": {"interaction": "http://127.0.0.1:P/metrics", ...}}   # only with `maka up --metrics`
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stack.errors import StackError

DEFAULT_STATE_DIR = Path(".state")
ENDPOINTS_FILE = "endpoints.json"
NOTIFY_STATUS_FILE = "run/notify.json"
"""The Interaction service's notification counters (``MAKA_NOTIFY_STATUS_FILE``, written when notifications are
on; ``maka status`` shows them)."""
WEB_PUBLIC_URL_ENV = "MAKA_WEB_PUBLIC_URL"


def notify_status_path(state_dir: Path) -> Path:
    """Where the stack's Interaction service writes its notification status."""
    return state_dir / NOTIFY_STATUS_FILE


def read_notify_status(state_dir: Path) -> dict[str, Any] | None:
    """The notification status of the stack in ``state_dir``; None when notifications are off (no file) or the
    file is unreadable."""
    try:
        data = json.loads(notify_status_path(state_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("targets"), list) else None


@dataclass
class Endpoints:
    """Addresses of one running stack."""

    interaction: str
    """``host:port`` (or ``unix:///abs/path.sock``) of the Interaction service."""
    broker: str
    """``host:port`` (or ``unix:///abs/path.sock``) of the Capability broker."""
    web: str = ""
    """Base URL of the web surface (empty when not running)."""
    redis_url: str = ""
    host_id: str = "local"
    pids: dict[str, int] = field(default_factory=lambda: dict[str, int]())
    metrics: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    """Prometheus ``/metrics`` URL of each service (``maka up --metrics``; empty otherwise)."""
    provider: str = ""
    """``host:port`` of the MCP provider's health endpoint (empty when unknown)."""
    config: str = ""
    """Absolute path of the ``mcpServers`` file the provider reads (``maka reload`` checks it first)."""
    mcp: str = ""
    """URL of the MCP front door (the Host's Tools over MCP Streamable HTTP; empty when not running)."""
    tokens: str = ""
    """Absolute path of the owner's tokens file (mode 0600, :mod:`stack.access`): the token the web page, the MCP
    front door and (with ``maka up --ports``) every gRPC service require; empty when the stack needs none."""


def write_endpoints(state_dir: Path, endpoints: Endpoints) -> Path:
    """Write ``endpoints.json`` atomically; returns its path."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / ENDPOINTS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(endpoints), indent=2))
    tmp.replace(path)
    return path


def read_endpoints(state_dir: Path) -> Endpoints:
    """Read ``endpoints.json``. Raises ``FileNotFoundError`` with a hint when no stack runs there."""
    path = state_dir / ENDPOINTS_FILE
    if not path.exists():
        raise FileNotFoundError(
            f"no running stack: {path.absolute()} not found (start one with `maka up` or `make run`,"
            " or point at its state folder with --state-dir DIR or MAKA_STATE_DIR=DIR)"
        )
    data = json.loads(path.read_text())
    known = {f for f in Endpoints.__dataclass_fields__}
    return Endpoints(**{k: v for k, v in data.items() if k in known})


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
