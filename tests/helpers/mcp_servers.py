"""Real MCP fixture servers (official SDK) with their JSON-RPC traffic captured, for the provider tests.

``serve_mcp(kind, transport)`` starts ``tests/fixtures/mcp_servers/mrtr_server.py`` — the low-level
``Server`` (plaintext ``requestState``) or ``MCPServer`` (sealed) — over stdio (behind the tee proxy)
or Streamable HTTP (uvicorn subprocess with the ASGI body logger), connects an
:class:`McpConnection` to it and yields a :class:`Served` with a :class:`Wire` reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from services.core.form import Action, Answer, Form
from services.mcp_provider.config import Era, HttpServer, ServerConfig, StdioServer
from services.mcp_provider.connection import McpConnection
from services.mcp_provider.manager import McpClientManager
from tests.helpers.waiting import eventually
from tests.helpers.wire import Wire

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


@dataclass
class Served:
    """A connected fixture server."""

    connection: McpConnection
    manager: McpClientManager
    wire: Wire
    kind: str
    transport: str
    process: asyncio.subprocess.Process | None = None
    """The HTTP fixture server's process (None for stdio)."""


@dataclass
class ScriptedForms:
    """A FormHandler that records each form and answers from ``answer(form, index)``."""

    answer: Callable[[Form, int], Answer] = field(default=lambda form, index: Answer(Action.DECLINE))
    forms: list[Form] = field(default_factory=lambda: list[Form]())

    async def __call__(self, form: Form) -> Answer:
        self.forms.append(form)
        return self.answer(form, len(self.forms) - 1)


def accept(**values: Any) -> Callable[[Form, int], Answer]:
    """Answer every form with ``accept`` and ``values``."""
    return lambda form, index: Answer(Action.ACCEPT, dict(values))


async def _http_server(kind: str, tmp: Path) -> tuple[asyncio.subprocess.Process, str]:
    port_file = tmp / "port"
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "tests.fixtures.mcp_servers.mrtr_server",
        "--kind",
        kind,
        "--http",
        str(port_file),
        "--wire",
        str(tmp / "wire.log"),
        cwd=ROOT,
    )
    await eventually(lambda: port_file.exists() or process.returncode is not None, what="fixture HTTP port", timeout=60)
    assert process.returncode is None, "fixture HTTP server exited"
    return process, f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"


@contextlib.asynccontextmanager
async def serve_mcp(
    tmp: Path,
    *,
    kind: str = "low",
    transport: str = "stdio",
    era: Era = Era.AUTO,
    drop_result_type: bool = False,
    unknown_input_method: bool = False,
    headers: dict[str, str] | None = None,
    name: str = "fx",
    manager: McpClientManager | None = None,
) -> AsyncIterator[Served]:
    """Start a fixture server and a connected :class:`McpConnection` (see module docstring)."""
    wire = Wire(tmp / "wire.log")
    process: asyncio.subprocess.Process | None = None
    config: ServerConfig
    if transport == "stdio":
        proxy = ["-m", "tests.fixtures.mcp_servers.tee_proxy", str(wire.path)]
        if drop_result_type:
            proxy.append("--drop-result-type")
        if unknown_input_method:
            proxy.append("--unknown-input-method")
        args = [*proxy, "--", PYTHON, "-m", "tests.fixtures.mcp_servers.mrtr_server", "--kind", kind]
        config = ServerConfig(name, StdioServer(PYTHON, tuple(args), {}, str(ROOT)), era)
    else:
        process, url = await _http_server(kind, tmp)
        config = ServerConfig(name, HttpServer(url, dict(headers or {})), era)
    connection = McpConnection(config, reconnect_initial_seconds=0.05, reconnect_max_seconds=0.5)
    manager = manager or McpClientManager(pacing_initial_ms=5, pacing_max_ms=20)
    manager.add(connection)
    try:
        await connection.start()
        await connection.wait_connected(timeout=30)
        yield Served(connection, manager, wire, kind, transport, process)
    finally:
        await connection.close()
        if process is not None and process.returncode is None:
            process.kill()  # not terminate(): uvicorn's graceful shutdown waits for open listen streams
            await process.wait()


ALL_SERVERS = [
    pytest.param(("low", "stdio"), id="lowlevel-stdio"),
    pytest.param(("low", "http"), id="lowlevel-http"),
    pytest.param(("high", "stdio"), id="mcpserver-stdio"),
    pytest.param(("high", "http"), id="mcpserver-http"),
]
LOW_SERVERS = [
    pytest.param(("low", "stdio"), id="lowlevel-stdio"),
    pytest.param(("low", "http"), id="lowlevel-http"),
]
