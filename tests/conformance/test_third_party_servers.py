"""MCP servers other people wrote, through the whole stack (issue 20): PyPI ``mcp-server-time`` and npm
``@modelcontextprotocol/server-everything``, each over stdio and Streamable HTTP. Tools are listed with
their schemas unchanged (output schemas included), called, progress reaches the broker's ``CallTool``
stream, structured content arrives intact and a Tool error is a result with ``isError``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2_grpc
from services.core.serving import KEEPALIVE_OPTIONS
from tests.conformance.client.runner import call_tool, wait_for_tools
from tests.conformance.client.stack import InProcessStack
from tests.conformance.harness import NODE22, ROOT, SERVER_EVERYTHING, require_tools

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(params=["stdio", "http"])
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
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


@pytest.fixture
async def broker(
    servers: dict[str, Any], tmp_path: Path
) -> AsyncIterator[broker_pb2_grpc.CapabilityBrokerServiceAsyncStub]:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    async with InProcessStack(config, host_id=f"third-{uuid.uuid4().hex[:8]}") as stack:
        channel = grpc.aio.insecure_channel(stack.broker_target, options=list(KEEPALIVE_OPTIONS))
        try:
            yield broker_pb2_grpc.CapabilityBrokerServiceStub(channel)
        finally:
            await channel.close()


async def test_mcp_server_time_lists_structured_tools_and_maps_results_and_errors(
    broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub,
) -> None:
    tools = {tool.qualified_name: tool for tool in await wait_for_tools(broker, {"time:get_current_time"}, timeout=60)}
    listed = tools["time:get_current_time"]
    assert json.loads(listed.input_schema_json)["required"] == ["timezone"]
    assert "properties" in json.loads(listed.output_schema_json)  # the package's outputSchema, unchanged

    now = await call_tool(broker, session_id="s-time", qualified_tool="time:get_current_time",
                          arguments={"timezone": "Europe/Paris"})  # fmt: skip
    assert (now.kind, now.is_error) == ("result", False), now
    assert now.result["structuredContent"]["timezone"] == "Europe/Paris"

    bad = await call_tool(broker, session_id="s-time", qualified_tool="time:get_current_time",
                          arguments={"timezone": "Not/AZone"})  # fmt: skip
    assert (bad.kind, bad.is_error) == ("result", True), bad
    assert "Not/AZone" in bad.text


async def test_server_everything_echoes_streams_progress_and_returns_structured_content(
    broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub,
) -> None:
    names = {"everything:echo", "everything:get-structured-content", "everything:trigger-long-running-operation"}
    tools = {tool.qualified_name: tool for tool in await wait_for_tools(broker, names, timeout=60)}
    assert json.loads(tools["everything:get-structured-content"].output_schema_json)["properties"]["temperature"]

    echo = await call_tool(broker, session_id="s-ev", qualified_tool="everything:echo", arguments={"message": "hi"})
    assert (echo.kind, echo.text) == ("result", "Echo: hi"), echo

    weather = await call_tool(broker, session_id="s-ev", qualified_tool="everything:get-structured-content",
                              arguments={"location": "Chicago"})  # fmt: skip
    assert weather.kind == "result", weather
    assert set(weather.result["structuredContent"]) >= {"temperature", "conditions", "humidity"}

    long = await call_tool(broker, session_id="s-ev", qualified_tool="everything:trigger-long-running-operation",
                           arguments={"duration": 1, "steps": 3})  # fmt: skip
    assert long.kind == "result", long
    assert [step for step, _, _ in long.progress] == [1, 2, 3], long.progress
    assert {total for _, total, _ in long.progress} == {3}

    invalid = await call_tool(broker, session_id="s-ev", qualified_tool="everything:get-structured-content",
                              arguments={"location": "Atlantis"})  # fmt: skip
    assert (invalid.kind == "result" and invalid.is_error) or invalid.code == "FAILURE_CODE_SERVER_ERROR", invalid
