"""What the two HTTP surfaces (``maka web``, the MCP front door) share to serve an ASGI app with uvicorn:
a server that leaves SIGINT/SIGTERM to the caller, a socket bound before uvicorn starts (so a taken port is
one clear error), a bounded wait until it serves, and the port file written atomically."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn

__all__ = ["QuietSignalsServer", "bind_socket", "wait_started", "write_atomically"]


class QuietSignalsServer(uvicorn.Server):
    """uvicorn without its own signal capture: the surface's ``serve`` handles SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def wait_started(server: uvicorn.Server, task: asyncio.Task[None], what: str, timeout: float) -> None:
    """Return once ``server`` (run by ``task``) serves; raises ``RuntimeError("<what> exited during startup")``
    when it ended first (its own error when it raised one) and ``TimeoutError`` past ``timeout`` s."""
    async with asyncio.timeout(timeout):
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError(f"{what} exited during startup")
            await asyncio.sleep(0.01)  # uvicorn exposes no started event; bounded by the timeout


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready socket bound to ``host:port`` (port 0 picks one). Raises ``RuntimeError``
    ``cannot bind HOST:PORT: <reason>``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it (Linux): a response written as headers then body is not held back by
    # Nagle waiting for the client's delayed ACK (~40 ms per request), which the event loop only turns off for
    # the sockets it creates itself.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise RuntimeError(f"cannot bind {host}:{port}: {error.strerror}") from None
    sock.set_inheritable(True)
    return sock


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a reader never sees half of it."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
