"""The legacy-era peer: npm ``@modelcontextprotocol/server-everything`` (TypeScript SDK 1.x, ``initialize``
handshake only) through the whole stack.

Ordinary Tools work; the MCP provider's ``initialize`` carries no elicitation capability (captured
by the stdio tee in ``tests/conformance/stdio_tee.py``); and its elicitation Tool fails cleanly with a
stable error. server-everything registers ``trigger-elicitation-request`` only for clients that
declare ``elicitation``, so it is never listed and the broker refuses it as ``FAILURE_CODE_UNKNOWN_TOOL``
(one final event, nothing sent to the server), after which the connection still works.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2_grpc
from services.core.keepalive import KEEPALIVE_OPTIONS
from tests.conformance.client.runner import call_tool, wait_for_tools
from tests.conformance.client.stack import InProcessStack
from tests.conformance.harness import NODE22, SERVER_EVERYTHING, require_tools

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TEE = Path(__file__).with_name("stdio_tee.py")


def _wire(log: Path) -> list[tuple[str, dict[str, Any]]]:
    frames: list[tuple[str, dict[str, Any]]] = []
    for line in log.read_text().splitlines():
        direction, _, body = line.partition(" ")
        if body.startswith("{"):
            frames.append((direction, json.loads(body)))
    return frames


@pytest.fixture
async def everything(tmp_path: Path) -> AsyncIterator[tuple[broker_pb2_grpc.CapabilityBrokerServiceAsyncStub, Path]]:
    """The stack with server-everything (stdio, behind the tee, era ``auto``) as MCP server ``everything``."""
    require_tools()
    wire_log = tmp_path / "wire.log"
    config = tmp_path / "mcp.json"
    server = {
        "command": sys.executable,
        "args": [str(TEE), str(wire_log), "--", str(NODE22), str(SERVER_EVERYTHING), "stdio"],
        "era": "auto",
    }
    config.write_text(json.dumps({"mcpServers": {"everything": server}}))
    async with InProcessStack(config, host_id=f"legacy-{uuid.uuid4().hex[:8]}") as stack:
        channel = grpc.aio.insecure_channel(stack.broker_target, options=list(KEEPALIVE_OPTIONS))
        try:
            yield broker_pb2_grpc.CapabilityBrokerServiceStub(channel), wire_log
        finally:
            await channel.close()


async def test_legacy_server_tools_are_listed_and_echo_works_through_the_stack(
    everything: tuple[broker_pb2_grpc.CapabilityBrokerServiceAsyncStub, Path],
) -> None:
    broker, _ = everything
    tools = await wait_for_tools(broker, {"everything:echo", "everything:get-sum"})
    names = {tool.qualified_name for tool in tools}
    assert "everything:trigger-elicitation-request" not in names

    outcome = await call_tool(
        broker, session_id="s-legacy", qualified_tool="everything:echo", arguments={"message": "hello maka"}
    )
    assert (outcome.kind, outcome.is_error, outcome.forms) == ("result", False, 0), outcome
    assert outcome.text == "Echo: hello maka"

    summed = await call_tool(
        broker, session_id="s-legacy", qualified_tool="everything:get-sum", arguments={"a": 2, "b": 40}
    )
    assert (summed.kind, summed.is_error) == ("result", False), summed
    assert "42" in summed.text


async def test_provider_initialize_to_a_legacy_server_declares_no_elicitation(
    everything: tuple[broker_pb2_grpc.CapabilityBrokerServiceAsyncStub, Path],
) -> None:
    broker, wire_log = everything
    await wait_for_tools(broker, {"everything:echo"})

    frames = _wire(wire_log)
    initializes = [body for direction, body in frames if direction == "C->S" and body.get("method") == "initialize"]
    assert len(initializes) == 1, frames
    params = initializes[0]["params"]
    assert params["protocolVersion"] == "2025-11-25"
    assert "elicitation" not in params["capabilities"]
    answers = [body for direction, body in frames if direction == "S->C" and body.get("id") == initializes[0]["id"]]
    assert [answer["result"]["protocolVersion"] for answer in answers] == ["2025-11-25"]
    # No frame at all claims elicitation: not the dual-era `server/discover` probe, not `initialize`.
    claims = [body for direction, body in frames if direction == "C->S" and "elicitation" in json.dumps(body)]
    assert claims == []


async def test_legacy_elicitation_tool_fails_with_a_stable_error_and_the_connection_keeps_working(
    everything: tuple[broker_pb2_grpc.CapabilityBrokerServiceAsyncStub, Path],
) -> None:
    broker, wire_log = everything
    await wait_for_tools(broker, {"everything:echo"})

    failed = await call_tool(
        broker, session_id="s-legacy", qualified_tool="everything:trigger-elicitation-request", arguments={}
    )
    assert (failed.kind, failed.code, failed.forms) == ("failure", "FAILURE_CODE_UNKNOWN_TOOL", 0), failed
    sent = [
        body.get("params", {}).get("name")
        for d, body in _wire(wire_log)
        if d == "C->S" and body.get("method") == "tools/call"
    ]
    assert "trigger-elicitation-request" not in sent

    after = await call_tool(
        broker, session_id="s-legacy", qualified_tool="everything:echo", arguments={"message": "still here"}
    )
    assert (after.kind, after.text) == ("result", "Echo: still here"), after
