"""The acceptance suite's harness: the stack started the way ``maka up`` starts it (:class:`Stack`),
real MCP servers built with the official SDK, and their JSON-RPC traffic captured on the wire.

- :func:`tee_stdio` / :func:`legacy_only_stdio` / :func:`http_entry` build ``mcpServers`` entries:
  a stdio server behind :mod:`tests.fixtures.mcp_servers.tee_proxy` (byte-exact ``C->S``/``S->C`` log),
  a dual-era SDK server made legacy-only by :mod:`tests.acceptance.legacy_only_proxy`, and a
  Streamable HTTP server (started by :func:`http_fixture_server`, with its ASGI body logger).
- :func:`acceptance_stack` starts :class:`~stack.topology.Stack` (embedded Redis, the
  Interaction service, broker and MCP provider as processes; optionally the web surface) with extra
  ``MAKA_*`` environment; yields :class:`~tests.helpers.stack.RunningStack`.
- :class:`Wire` reads a captured log: requests by method, ``tools/call`` legs, responses by id.

Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY

from stack.ports import Ports
from stack.topology import Stack
from tests.helpers.stack import START_TIMEOUT, STOP_TIMEOUT, RunningStack
from tests.helpers.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


@dataclass(frozen=True)
class Wire:
    """The captured JSON-RPC traffic of one MCP server (``C->S``/``S->C`` lines, oldest first)."""

    path: Path

    def raw(self) -> list[tuple[str, str]]:
        """(direction, JSON text exactly as logged); split on ``\\n`` only (U+2028 may sit in a string)."""
        if not self.path.exists():
            return []
        out: list[tuple[str, str]] = []
        for line in self.path.read_text(encoding="utf-8").split("\n"):
            direction, _, body = line.partition(" ")
            if direction in ("C->S", "S->C") and body.startswith("{"):
                out.append((direction, body))
        return out

    def messages(self) -> list[tuple[str, dict[str, Any]]]:
        """(direction, decoded message) in order."""
        return [(direction, json.loads(body)) for direction, body in self.raw()]

    def requests(self, method: str) -> list[dict[str, Any]]:
        """Client requests of ``method`` in order."""
        return [m for d, m in self.messages() if d == "C->S" and m.get("method") == method]

    def tool_calls(self, name: str | None = None, *, where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """``tools/call`` legs (of Tool ``name``, whose arguments contain every ``where`` item)."""
        legs = []
        for call in self.requests("tools/call"):
            params = call["params"]
            arguments = params.get("arguments") or {}
            if name is not None and params["name"] != name:
                continue
            if where is not None and any(arguments.get(k) != v for k, v in where.items()):
                continue
            legs.append(call)
        return legs

    def response(self, request_id: Any) -> dict[str, Any]:
        """The server's response to ``request_id`` (``AssertionError`` when there is none)."""
        for direction, message in self.messages():
            if direction == "S->C" and message.get("id") == request_id and "method" not in message:
                return message
        raise AssertionError(f"no response to {request_id!r} in {self.path}")

    def raw_response(self, request_id: Any) -> str:
        """The server's response to ``request_id`` as the exact text that crossed the wire."""
        for direction, body in self.raw():
            if direction == "S->C":
                message = json.loads(body)
                if message.get("id") == request_id and "method" not in message:
                    return body
        raise AssertionError(f"no response to {request_id!r} in {self.path}")

    async def wait_tool_calls(self, count: int, name: str | None = None, **where: Any) -> list[dict[str, Any]]:
        """At least ``count`` matching ``tools/call`` legs, polling (bounded, 30 s) until they are logged."""
        await eventually(
            lambda: len(self.tool_calls(name, where=where)) >= count, what=f"{count} {name} legs", timeout=30
        )
        return self.tool_calls(name, where=where)


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
