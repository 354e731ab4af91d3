"""A provider whose server name another provider already holds: the broker refuses its registration, and
the refusal shows in ``GetStatus`` (what ``maka status`` prints) and in the calls' ``SERVER_UNAVAILABLE``.

Real processes throughout: the Interaction service over the real redis-server, the broker on loopback, a
synthetic provider holding server ``fx`` over a real ``Connect`` stream, and the MCP provider with a real
SDK MCP server over stdio also named ``fx``."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from services.broker import main as broker_main
from services.broker.settings import Settings as BrokerSettings
from services.core.serving import RunningServer, start_server
from services.interaction import main as interaction_main
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider import main as provider_main
from services.mcp_provider.main import ProviderApp
from services.mcp_provider.settings import Settings as ProviderSettings
from surfaces.common.server_status import server_lines
from tests.helpers.broker import Provider, deploy_tool
from tests.helpers.mcp_servers import ROOT
from tests.helpers.waiting import eventually

pytestmark = pytest.mark.slow

PYTHON = sys.executable
REFUSAL = "refused by the broker: server fx is already registered by provider other"


@dataclass
class RefusedStack:
    broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub
    holder: Provider
    provider: ProviderApp


@pytest.fixture
async def refused(redis_url: str, tmp_path: Path) -> AsyncIterator[RefusedStack]:
    """The synthetic provider ``other`` holds server ``fx``; then the MCP provider with its own ``fx`` starts."""
    config = tmp_path / "mcp.json"
    low = ["-m", "tests.fixtures.mcp_servers.mrtr_server", "--kind", "low"]
    config.write_text(json.dumps({"mcpServers": {"fx": {"command": PYTHON, "args": low, "cwd": str(ROOT)}}}))
    servers: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    holder: Provider | None = None
    try:
        interaction_settings = InteractionSettings(listen="127.0.0.1:0", redis_url=redis_url, host_id="refused-test")
        interaction = await start_server(await interaction_main.build(interaction_settings), interaction_settings)
        servers.append(interaction)
        broker_settings = BrokerSettings(  # the holder sends no heartbeats: a long interval keeps it live
            listen="127.0.0.1:0",
            interaction_target=f"127.0.0.1:{interaction.port}",
            host_id="refused-test",
            heartbeat_seconds=60.0,
        )
        broker = await start_server(await broker_main.build(broker_settings), broker_settings)
        servers.append(broker)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{broker.port}")
        channels.append(channel)
        holder = Provider(channel, "other", [deploy_tool("deploy", server="fx")])
        await holder.connect()
        provider_settings = ProviderSettings(
            listen="127.0.0.1:0",
            broker_target=f"127.0.0.1:{broker.port}",
            mcp_config=config,
            reconnect_initial_seconds=0.05,
            reconnect_max_seconds=0.5,
        )
        provider = await start_server(await provider_main.build(provider_settings), provider_settings)
        servers.append(provider)
        assert isinstance(provider.app, ProviderApp)
        yield RefusedStack(broker_pb2_grpc.CapabilityBrokerServiceStub(channel), holder, provider.app)
    finally:
        if holder is not None:
            await holder.close()
        for channel in channels:
            await channel.close()
        for server in reversed(servers):
            await server.stop()


async def _fx(stack: RefusedStack) -> broker_pb2.ServerStatus | None:
    status = await stack.broker.GetStatus(broker_pb2.GetStatusRequest())
    return next((server for server in status.servers if server.name == "fx"), None)


async def _refused_fx(stack: RefusedStack) -> broker_pb2.ServerStatus | None:
    server = await _fx(stack)
    return server if server is not None and server.last_error.summary == REFUSAL else None


async def _call_failure(stack: RefusedStack, tool: str) -> broker_pb2.CallFailure:
    request = broker_pb2.CallToolRequest(session_id="s1", turn_id="t1", tool_use_id="tu-1", tool_name=tool)
    async with asyncio.timeout(10):
        async for event in stack.broker.CallTool(request):
            kind = event.WhichOneof("event")
            if kind == "failure":
                failure: broker_pb2.CallFailure = event.failure
                return failure
            assert kind not in ("accepted", "result", "lost", "stopped"), event
    raise AssertionError("the call ended without a failure")


async def test_a_refused_registration_shows_in_get_status_as_failed_with_the_brokers_reason(
    refused: RefusedStack,
) -> None:
    server = await eventually(lambda: _refused_fx(refused), what="fx reported refused", timeout=30)

    assert server.state == broker_pb2.SERVER_STATE_FAILED
    assert server.HasField("next_retry_time")
    lines = server_lines(server)
    assert lines[0].startswith("fx: failed, stdio")
    assert f"    cause: {REFUSAL}" in lines
    assert refused.provider.provider is not None
    assert not refused.provider.provider.links["fx"].registered


async def test_a_call_to_the_refused_providers_tool_fails_server_unavailable_naming_the_refusal(
    refused: RefusedStack,
) -> None:
    await eventually(lambda: _refused_fx(refused), what="fx reported refused", timeout=30)

    failure = await _call_failure(refused, "fx:ask")

    assert failure.code == broker_pb2.FAILURE_CODE_SERVER_UNAVAILABLE
    assert REFUSAL in failure.message
    held = await refused.broker.ListTools(broker_pb2.ListToolsRequest())
    assert {tool.qualified_name: tool.provider_id for tool in held.tools} == {"fx:deploy": "other"}


async def test_the_refused_provider_registers_once_the_holder_goes_away(refused: RefusedStack) -> None:
    await eventually(lambda: _refused_fx(refused), what="fx reported refused", timeout=30)

    await refused.holder.close()

    assert refused.provider.provider is not None
    link = refused.provider.provider.links["fx"]
    await eventually(lambda: link.registered, what="fx registered after the holder left", timeout=30)
    server = await eventually(lambda: _ready(refused), what="fx reported ready without the refusal", timeout=30)
    assert not server.HasField("last_error") or server.last_error.summary != REFUSAL
    tools = await refused.broker.ListTools(broker_pb2.ListToolsRequest())
    assert {tool.qualified_name: tool.provider_id for tool in tools.tools}["fx:ask"] == "mcp:fx"


async def _ready(stack: RefusedStack) -> broker_pb2.ServerStatus | None:
    server = await _fx(stack)
    return server if server is not None and server.state == broker_pb2.SERVER_STATE_READY else None
