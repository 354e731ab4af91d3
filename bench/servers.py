"""The example MCP server (``examples/deploy_server.py``) over Streamable HTTP on loopback, as a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bench.system import ROOT

START_TIMEOUT = 30.0
STOP_GRACE = 5.0


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the server binds it right after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class ExampleServer:
    """A running example server: its MCP endpoint ``url`` and process id."""

    url: str
    pid: int


async def _accepting(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


@contextlib.asynccontextmanager
async def example_server(log_path: Path) -> AsyncIterator[ExampleServer]:
    """Start ``python -m examples.deploy_server --http PORT`` (output to ``log_path``), wait (bounded by
    ``START_TIMEOUT`` s) until it accepts TCP connections, yield it, then SIGTERM it (SIGKILL after grace).

    Raises ``RuntimeError`` when it exits or does not accept connections in time.
    """
    port = free_port()
    with log_path.open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "examples.deploy_server",
            "--http",
            str(port),
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while not await _accepting(port):
                if process.returncode is not None:
                    raise RuntimeError(f"example server exited with {process.returncode}; see {log_path}")
                await asyncio.sleep(0.05)  # polling a port that is still binding, bounded above
        yield ExampleServer(url=f"http://127.0.0.1:{port}/mcp", pid=process.pid)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(STOP_GRACE):
                    await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
