"""A real ``maka up`` for the front-door client tests (example server, ephemeral ports) and the Node tools that
drive it: the TypeScript SDK client script and the MCP Inspector CLI, installed into ``.tools/mcp-clients`` by
``scripts/setup_node_tools.sh`` (``scripts/setup.sh --test``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from stack.access import read_owner_token
from stack.state_dir import Endpoints, read_endpoints
from surfaces.common.asgi_server import QuietSignalsServer, bind_socket, wait_started
from surfaces.mcp.main import build
from surfaces.mcp.settings import McpSettings

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES_CONFIG = ROOT / "examples" / "mcp.json"
MAKA = [sys.executable, "-m", "surfaces.cli.main"]
START_TIMEOUT = 120.0
NODE = ROOT / ".tools" / "bin" / "node22"
CLIENT_MODULES = ROOT / ".tools" / "mcp-clients" / "node_modules"
TS_CLIENT = Path(__file__).resolve().parent / "ts_client.cjs"
INSPECTOR = CLIENT_MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"


@dataclass
class Up:
    """A running ``maka up`` and its endpoints."""

    process: asyncio.subprocess.Process
    state_dir: Path
    endpoints: Endpoints
    ready_line: str = ""
    config: Path = EXAMPLES_CONFIG

    @property
    def auth(self) -> dict[str, str]:
        """``Authorization: Bearer <owner token>`` of the stack (docs/security.md "Other local users"), or nothing
        when it runs on a tokens file of the test's own."""
        token = read_owner_token(Path(self.endpoints.tokens)) if self.endpoints.tokens else None
        return {"Authorization": f"Bearer {token}"} if token else {}


@contextlib.asynccontextmanager
async def owner_client(up: Up, **options: Any) -> AsyncIterator[Client]:
    """The official Python SDK client of the front door, presenting the owner's bearer token."""
    http = httpx2.AsyncClient(headers=up.auth, timeout=60)
    async with http, Client(streamable_http_client(up.endpoints.mcp, http_client=http), **options) as client:
        yield client


@contextlib.asynccontextmanager
async def maka_up(
    tmp: Path, env: Mapping[str, str] | None = None, extra_servers: Mapping[str, object] | None = None
) -> AsyncIterator[Up]:
    """``maka up`` with the example servers (and ``extra_servers``) on ephemeral ports until the block ends
    (then SIGINT)."""
    state_dir = tmp / "state"
    config = tmp / "mcp.json"
    servers = json.loads(EXAMPLES_CONFIG.read_text())
    servers["mcpServers"].update(extra_servers or {})
    config.write_text(json.dumps(servers))
    with (tmp / "up.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *MAKA,
            "up",
            "--config",
            str(config),
            "--state-dir",
            str(state_dir),
            "--ports",
            "ephemeral",
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START_TIMEOUT):
            ready = (await process.stdout.readline()).decode()
        assert ready.startswith("maka is ready: "), ready + (tmp / "up.log").read_text()
        yield Up(process, state_dir, read_endpoints(state_dir), ready, config)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            async with asyncio.timeout(60):
                await process.communicate()
        with contextlib.suppress(FileNotFoundError):
            for pid in read_endpoints(state_dir).pids.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def node_env(headers: Mapping[str, str] | None = None, catalog: Path | None = None) -> dict[str, str]:
    """The environment of a Node client run: the installed client packages on ``NODE_PATH``, extra headers for
    the TypeScript script, and a throwaway Inspector catalog (it writes one)."""
    env = {**os.environ, "NODE_PATH": str(CLIENT_MODULES), "MAKA_TS_HEADERS": json.dumps(dict(headers or {}))}
    if catalog is not None:
        env["MCP_CATALOG_PATH"] = str(catalog)
    return env


async def run_node(*argv: str, env: Mapping[str, str], timeout: float = 90.0) -> tuple[int, str, str]:
    """Run Node 22 with ``argv`` to completion (bounded): exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        str(NODE), *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=dict(env)
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def inspector(url: str, *argv: str, tmp: Path, headers: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """``mcp-inspector --cli URL --transport http ARGV`` (plus ``--header`` for each of ``headers``)."""
    extra = [arg for name, value in (headers or {}).items() for arg in ("--header", f"{name}: {value}")]
    return await run_node(
        str(INSPECTOR), "--cli", url, "--transport", "http", *argv, *extra, env=node_env(catalog=tmp / "catalog.json")
    )


@contextlib.asynccontextmanager
async def serving_door(settings: McpSettings) -> AsyncIterator[str]:
    """The front door built from ``settings``, served in this loop on a free loopback port; yields its base URL
    (``http://127.0.0.1:PORT``, the endpoint is ``/mcp``)."""
    app = await build(settings)
    sock = bind_socket("127.0.0.1", 0)
    server = QuietSignalsServer(uvicorn.Config(app.asgi, lifespan="on", access_log=False, log_config=None))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await wait_started(server, task, "the MCP endpoint", 10)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()
        await app.close()
