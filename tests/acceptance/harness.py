"""The acceptance suite's harness: the stack started the way ``maka up`` starts it (:class:`Stack`),
real MCP servers built with the official SDK, and their JSON-RPC traffic captured on the wire.

- :func:`tee_stdio` / :func:`legacy_only_stdio` / :func:`http_entry` build ``mcpServers`` entries:
  a stdio server behind :mod:`tests.fixtures.mcp_servers.tee_proxy` (byte-exact ``C->S``/``S->C`` log),
  a dual-era SDK server made legacy-only by :mod:`tests.acceptance.legacy_only_proxy`, and a
  Streamable HTTP server (started by :func:`http_fixture_server`, with its ASGI body logger).
- :func:`acceptance_stack` starts :class:`~stack.topology.Stack` (embedded Redis, the
  Interaction service, broker and MCP provider as processes; optionally the web surface) with extra
  ``MAKA_*`` environment; yields :class:`~tests.helpers.stack.RunningStack`.
- the tee proxy logs are read with :class:`tests.helpers.wire.Wire`.

Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY

from stack.ports import Ports
from stack.topology import Stack
from tests.helpers.stack import START_TIMEOUT, STOP_TIMEOUT, RunningStack
from tests.helpers.waiting import eventually
from tests.helpers.wire import Wire

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def claimed_capabilities(message: Mapping[str, Any]) -> Any:
    """The client capabilities a modern request declares in ``params._meta`` (``"absent"`` when none)."""
    meta = (message.get("params") or {}).get("_meta") or {}
    return meta.get(CLIENT_CAPABILITIES_META_KEY, "absent")


def tee_stdio(log: Path, *server: str, era: str = "auto") -> dict[str, Any]:
    """An ``mcpServers`` stdio entry running ``python -m <server...>`` behind the tee proxy logging to ``log``."""
    args = ["-m", "tests.fixtures.mcp_servers.tee_proxy", str(log), "--", PYTHON, "-m", *server]
    return {"command": PYTHON, "args": args, "cwd": str(ROOT), "era": era}


def legacy_only_stdio(log: Path, *server: str) -> dict[str, Any]:
    """An ``era: auto`` stdio entry whose dual-era SDK server is made legacy-only (``server/discover`` → -32601)."""
    args = ["-m", "tests.acceptance.legacy_only_proxy", str(log), "--", PYTHON, "-m", *server]
    return {"command": PYTHON, "args": args, "cwd": str(ROOT), "era": "auto"}


def http_entry(url: str, era: str = "auto") -> dict[str, Any]:
    """An ``mcpServers`` Streamable HTTP entry."""
    return {"url": url, "era": era}


@asynccontextmanager
async def http_fixture_server(directory: Path, kind: str = "high") -> AsyncIterator[tuple[str, Wire]]:
    """``tests.fixtures.mcp_servers.mrtr_server`` over Streamable HTTP with its body logger; yields (url, wire)."""
    directory.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - test setup, before any server runs
    port_file = directory / "port"
    wire = Wire(directory / "wire.log")
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "tests.fixtures.mcp_servers.mrtr_server",
        "--kind",
        kind,
        "--http",
        str(port_file),
        "--wire",
        str(wire.path),
        cwd=ROOT,
    )
    try:
        await eventually(
            lambda: port_file.exists() or process.returncode is not None, what="fixture HTTP port", timeout=60
        )
        assert process.returncode is None, "fixture HTTP server exited"
        yield f"http://127.0.0.1:{port_file.read_text().strip()}/mcp", wire
    finally:
        if process.returncode is None:
            process.terminate()
            async with asyncio.timeout(20):
                await process.wait()


def write_config(directory: Path, servers: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write ``{"mcpServers": servers}`` to ``directory/mcp.json``; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "mcp.json"
    config.write_text(json.dumps({"mcpServers": dict(servers)}, indent=2))
    return config


@asynccontextmanager
async def acceptance_stack(
    directory: Path, config: Path, *, env: Mapping[str, str] | None = None, web: bool = False
) -> AsyncIterator[RunningStack]:
    """The stack as ``maka up`` runs it (ephemeral ports, embedded Redis), with ``env`` for every child.

    Raises ``TimeoutError`` when start or stop exceed their bounds, ``StackError`` when a child fails.
    """
    lines: dict[str, list[str]] = defaultdict(list)

    def sink(name: str, line: str) -> None:
        lines[name].append(line)
        sys.stderr.write(f"[{name}] {line}\n")

    stack = Stack(
        config,
        directory / "state",
        ports=Ports.ephemeral(),
        web=web,
        sink=sink,
        ready_timeout=60,
        stop_grace=5,
        extra_env=env,
    )
    async with asyncio.timeout(START_TIMEOUT):
        endpoints = await stack.start()
    try:
        yield RunningStack(stack, endpoints, lines)
    finally:
        async with asyncio.timeout(STOP_TIMEOUT):
            await stack.stop()
