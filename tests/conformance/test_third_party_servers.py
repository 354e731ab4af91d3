"""MCP servers other people wrote, through the whole stack as processes: PyPI ``mcp-server-time``
and npm ``@modelcontextprotocol/server-everything``, each over stdio and Streamable HTTP, behind ``maka up``'s
supervisor (Redis, Interaction service, broker, MCP provider as separate processes) and driven with the
``maka`` CLI as a process. Tools are listed by ``maka tools --json`` with their schemas unchanged (output
schemas included), called with ``maka call``, progress is shown on its stderr, structured content arrives
intact and a Tool error is a result with ``isError`` (exit 1)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc.aio
import pytest
import pytest_asyncio

from maka.broker.v1 import broker_pb2_grpc
from tests.conformance.client.runner import wait_for_tools
from tests.conformance.harness import NODE22, SERVER_EVERYTHING, require_tools
from tests.helpers.stack import ROOT, RunningStack, running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

TIME_TOOLS = {"time:get_current_time", "time:convert_time"}
EVERYTHING_TOOLS = {"everything:echo", "everything:get-structured-content", "everything:trigger-long-running-operation"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module", params=["stdio", "http"])
def servers(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """``mcpServers`` entries for ``time`` and ``everything`` over one transport (HTTP servers started here)."""
    require_tools()
    if request.param == "stdio":
        yield {
            "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
            "everything": {"command": str(NODE22), "args": [str(SERVER_EVERYTHING), "stdio"]},
        }
        return
    time_port, everything_port = _free_port(), _free_port()
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.fixtures.mcp_servers.time_http", str(time_port)],
            cwd=ROOT, stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [str(NODE22), str(SERVER_EVERYTHING), "streamableHttp"],
            cwd=ROOT, env={**os.environ, "PORT": str(everything_port)}, stderr=subprocess.DEVNULL,
        ),
    ]  # fmt: skip
    try:
        # The provider retries with backoff until each server listens (no wait needed here).
        yield {
            "time": {"url": f"http://127.0.0.1:{time_port}/mcp"},
            "everything": {"url": f"http://127.0.0.1:{everything_port}/mcp"},
        }
    finally:
        for child in children:
            child.terminate()
            child.wait(timeout=10)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(servers: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningStack]:
    """The stack as processes with both servers, once every expected Tool is registered."""
    root = tmp_path_factory.mktemp("third-party")
    config = root / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    async with running_stack(root, config=config) as running:
        async with grpc.aio.insecure_channel(running.endpoints.broker) as channel:
            await wait_for_tools(
                broker_pb2_grpc.CapabilityBrokerServiceStub(channel), TIME_TOOLS | EVERYTHING_TOOLS, timeout=60
            )
        yield running


async def _maka(running: RunningStack, *args: str) -> tuple[int, str, str]:
    """``maka ARGS`` as a process against the running stack: exit code, stdout, stderr."""
    state = running.stack.state_dir
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "surfaces.cli.main", *args, "--state-dir", str(state),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def _tools(running: RunningStack) -> dict[str, dict[str, Any]]:
    code, out, err = await _maka(running, "tools", "--json")
    assert code == 0, err
    return {tool["name"]: tool for tool in json.loads(out)}


async def _call(
    running: RunningStack, tool: str, arguments: dict[str, Any], *flags: str
) -> tuple[int, dict[str, Any], str]:
    """``maka call TOOL --args JSON --json``: exit code, the printed ``CallToolResult`` ({} if none), stderr."""
    code, out, err = await _maka(running, "call", tool, "--args", json.dumps(arguments), "--json", *flags)
    return code, (json.loads(out) if out.strip() else {}), err


def _text(result: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result.get("content", []) if block.get("type") == "text")


async def test_mcp_server_time_lists_structured_tools_and_maps_results_and_errors(stack: RunningStack) -> None:
    listed = (await _tools(stack))["time:get_current_time"]
    assert listed["inputSchema"]["required"] == ["timezone"]
    assert "properties" in listed["outputSchema"]  # the package's outputSchema, unchanged

    code, now, err = await _call(stack, "time:get_current_time", {"timezone": "Europe/Paris"})
    assert code == 0, err
    assert now["structuredContent"]["timezone"] == "Europe/Paris"

    code, bad, err = await _call(stack, "time:get_current_time", {"timezone": "Not/AZone"})
    assert (code, bad.get("isError")) == (1, True), err  # the Tool's error is a result, exit 1
    assert "Not/AZone" in _text(bad)


async def test_server_everything_echoes_streams_progress_and_returns_structured_content(stack: RunningStack) -> None:
    tools = await _tools(stack)
    assert set(tools) >= EVERYTHING_TOOLS
    assert tools["everything:get-structured-content"]["outputSchema"]["properties"]["temperature"]

    code, echo, err = await _call(stack, "everything:echo", {"message": "hi"})
    assert (code, _text(echo)) == (0, "Echo: hi"), err

    code, weather, err = await _call(stack, "everything:get-structured-content", {"location": "Chicago"})
    assert code == 0, err
    assert set(weather["structuredContent"]) >= {"temperature", "conditions", "humidity"}

    code, _, err = await _call(stack, "everything:trigger-long-running-operation", {"duration": 1, "steps": 3})
    assert code == 0, err
    progress = [line.split()[1] for line in err.splitlines() if line.startswith("progress ")]
    assert progress == ["1/3", "2/3", "3/3"], err  # shown by the surface as the server reported it

    # Outside the Tool's enum: the broker's inputSchema check refuses it before the server sees it ...
    code, _, err = await _call(stack, "everything:get-structured-content", {"location": "Atlantis"})
    assert code == 3, err
    assert "INVALID_ARGUMENTS: " in err
    assert '/location: must be one of ["New York", "Chicago", "Los Angeles"]' in err
    # ... and with the check skipped, the server's own refusal is mapped (an isError result or its JSON-RPC error).
    code, invalid, err = await _call(
        stack, "everything:get-structured-content", {"location": "Atlantis"}, "--no-validate"
    )
    assert (code == 1 and invalid.get("isError")) or (code == 3 and "SERVER_ERROR: " in err), (code, invalid, err)
