"""The provider against the real broker and Interaction service (in-process gRPC, real redis-server)
and a real SDK MCP server over stdio (traffic captured by the tee proxy)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio
import pytest

from maka.broker.v1 import broker_pb2, broker_pb2_grpc
from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_service_pb2, interaction_service_pb2_grpc
from services.broker import main as broker_main
from services.broker.settings import Settings as BrokerSettings
from services.core.serving import RunningServer, start_server
from services.interaction import main as interaction_main
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider import main as provider_main
from services.mcp_provider.main import ProviderApp
from services.mcp_provider.settings import Settings as ProviderSettings
from tests.helpers.mcp_servers import ROOT
from tests.helpers.waiting import eventually
from tests.helpers.wire import Wire

pytestmark = pytest.mark.slow

PYTHON = sys.executable


@dataclass
class ProviderStack:
    broker: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub
    interaction: interaction_service_pb2_grpc.InteractionServiceAsyncStub
    provider: ProviderApp
    wire: Wire


@pytest.fixture
async def stack(redis_url: str, tmp_path: Path) -> AsyncIterator[ProviderStack]:
    wire = Wire(tmp_path / "wire.log")
    config = tmp_path / "mcp.json"
    args = ["-m", "tests.fixtures.mcp_servers.tee_proxy", str(wire.path), "--"]
    args += [PYTHON, "-m", "tests.fixtures.mcp_servers.mrtr_server", "--kind", "low"]
    high = ["-m", "tests.fixtures.mcp_servers.mrtr_server", "--kind", "high"]
    servers_config = {
        "fx": {"command": PYTHON, "args": args, "cwd": str(ROOT)},
        "hi": {"command": PYTHON, "args": high, "cwd": str(ROOT), "era": "modern"},
    }
    config.write_text(json.dumps({"mcpServers": servers_config}))
    servers: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []
    try:
        interaction_settings = InteractionSettings(listen="127.0.0.1:0", redis_url=redis_url, host_id="prov-test")
        interaction = await start_server(await interaction_main.build(interaction_settings), interaction_settings)
        servers.append(interaction)
        broker_settings = BrokerSettings(
            listen="127.0.0.1:0",
            interaction_target=f"127.0.0.1:{interaction.port}",
            host_id="prov-test",
            heartbeat_seconds=1.0,
        )
        broker = await start_server(await broker_main.build(broker_settings), broker_settings)
        servers.append(broker)
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
        broker_channel = grpc.aio.insecure_channel(f"127.0.0.1:{broker.port}")
        interaction_channel = grpc.aio.insecure_channel(f"127.0.0.1:{interaction.port}")
        channels += [broker_channel, interaction_channel]
        result = ProviderStack(
            broker_pb2_grpc.CapabilityBrokerServiceStub(broker_channel),
            interaction_service_pb2_grpc.InteractionServiceStub(interaction_channel),
            provider.app,
            wire,
        )
        await eventually(lambda: _registered(result), what="provider registered", timeout=30)
        yield result
    finally:
        for channel in channels:
            await channel.close()
        for server in reversed(servers):
            await server.stop()


def _registered(stack: ProviderStack) -> bool:
    assert stack.provider.provider is not None
    return all(link.registered for link in stack.provider.provider.links.values())


async def _tools(stack: ProviderStack) -> dict[str, broker_pb2.Tool]:
    response = await stack.broker.ListTools(broker_pb2.ListToolsRequest())
    return {tool.qualified_name: tool for tool in response.tools}


def _call(stack: ProviderStack, tool: str, arguments: dict[str, Any], tool_use_id: str = "tu-1") -> Any:
    return stack.broker.CallTool(
        broker_pb2.CallToolRequest(
            session_id="s1", turn_id="t1", tool_use_id=tool_use_id, tool_name=tool, arguments_json=json.dumps(arguments)
        )
    )


async def _next(events: Any, kind: str) -> Any:
    async with asyncio.timeout(20):
        async for event in events:
            if event.WhichOneof("event") == kind:
                return getattr(event, kind)
            if event.WhichOneof("event") in ("result", "failure", "lost", "stopped"):
                raise AssertionError(f"call ended with {event} while waiting for {kind}")
    raise AssertionError(f"stream ended before {kind}")


async def test_provider_registers_each_server_as_mcp_provider_with_qualified_tools(stack: ProviderStack) -> None:
    tools = await _tools(stack)

    assert "fx:ask" in tools
    assert tools["fx:ask"].provider_id == "mcp:fx"
    assert tools["hi:progress"].provider_id == "mcp:hi"
    assert json.loads(tools["fx:ask"].input_schema_json) == {"type": "object"}


async def test_two_round_tool_call_through_the_broker_and_a_host_form_completes_once(stack: ProviderStack) -> None:
    events = _call(stack, "fx:ask", {"state": "kept-in-provider"})
    awaiting = await _next(events, "awaiting_interaction")
    answer = form_pb2.Answer(action=form_pb2.ACTION_ACCEPT)
    answer.values["name"].string_value = "Ada"
    await stack.interaction.Answer(
        interaction_service_pb2.AnswerRequest(
            interaction_id=awaiting.interaction_id, session_id="s1", submission_id="sub-1", answer=answer
        )
    )
    result = await _next(events, "result")

    seen = json.loads(json.loads(result.call_tool_result_json)["content"][0]["text"])
    assert seen["responses"] == {"profile": {"action": "accept", "content": {"name": "Ada"}}}
    assert seen["state"] == "kept-in-provider"
    assert len(stack.wire.tool_calls("ask")) == 2


async def test_stop_while_the_form_is_pending_sends_no_retry(stack: ProviderStack) -> None:
    events = _call(stack, "fx:ask", {})
    await _next(events, "awaiting_interaction")
    stopped = await stack.broker.Stop(broker_pb2.StopRequest(session_id="s1"))
    await _next(events, "stopped")

    assert stopped.stopped_invocations == 1
    assert len(stack.wire.tool_calls("ask")) == 1


async def test_unsupported_input_request_fails_through_the_broker_with_its_stable_code(stack: ProviderStack) -> None:
    failure = await _next(_call(stack, "fx:mixed", {}), "failure")

    assert failure.code == broker_pb2.FAILURE_CODE_UNSUPPORTED_INPUT_REQUEST
    assert len(stack.wire.tool_calls("mixed")) == 1


async def test_mcp_reconnect_re_registers_and_the_pending_call_is_lost_without_a_retry(stack: ProviderStack) -> None:
    assert stack.provider.provider is not None
    link = stack.provider.provider.links["fx"]
    connection = stack.provider.manager.connection("fx")
    before = (connection.generation, link.registrations)
    events = _call(stack, "fx:ask", {})
    await _next(events, "awaiting_interaction")

    connection.mark_broken()
    lost = await _next(events, "lost")
    await eventually(lambda: link.registered and link.registrations > before[1], what="re-registration")

    assert lost.reason
    assert connection.generation == before[0] + 1
    assert len(stack.wire.tool_calls("ask")) == 1
    assert "fx:ask" in await _tools(stack)


async def test_mcp_progress_reaches_the_caller_as_call_progress(stack: ProviderStack) -> None:
    events = _call(stack, "hi:progress", {})
    progress = await _next(events, "progress")
    result = await _next(events, "result")

    assert (progress.progress, progress.total, progress.message) == (0.5, 1.0, "half way")
    assert json.loads(result.call_tool_result_json)["content"][0]["text"] == "done"


async def test_heartbeats_keep_the_registration_alive_past_three_intervals(stack: ProviderStack) -> None:
    assert stack.provider.provider is not None
    link = stack.provider.provider.links["fx"]
    registrations = link.registrations

    await eventually(lambda: link.heartbeats >= 4, what="four heartbeats (broker interval 1 s)", timeout=20)

    assert link.registered
    assert link.registrations == registrations
    assert "fx:ask" in await _tools(stack)


def test_tools_the_broker_would_refuse_are_left_out_of_the_registration() -> None:
    from services.mcp_provider.broker_link import descriptors
    from services.mcp_provider.connection import ConnectionSnapshot, ToolInfo

    def tool(name: str) -> ToolInfo:
        return ToolInfo(name, "d", {"type": "object"}, 1, "x")

    names = ["ok", "bad\nname", "a:b", "x" * 257, "ünïcode ✓"]
    snapshot = ConnectionSnapshot("srv", 1, True, tuple(tool(n) for n in names))

    registered = descriptors(snapshot)

    assert [d.name for d in registered] == ["ok", "ünïcode ✓"]
    assert {d.claimed_server for d in registered} == {"srv"}
    assert json.loads(registered[0].input_schema_json) == {"type": "object"}


def test_a_tools_title_and_annotations_are_registered_as_the_server_listed_them() -> None:
    from services.mcp_provider.broker_link import descriptors
    from services.mcp_provider.connection import ConnectionSnapshot, ToolInfo

    hinted = ToolInfo("wipe", "d", {"type": "object"}, 1, "x", None, "Wipe it", {"destructiveHint": True})
    plain = ToolInfo("ping", "d", {"type": "object"}, 1, "y")

    registered = descriptors(ConnectionSnapshot("srv", 1, True, (hinted, plain)))

    assert [(d.title, d.annotations_json) for d in registered] == [("Wipe it", '{"destructiveHint": true}'), ("", "")]


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        pytest.param(form_pb2.ACTION_ACCEPT, {"action": "accept", "content": {}}, id="accept"),
        pytest.param(form_pb2.ACTION_DECLINE, {"action": "decline"}, id="decline"),
        pytest.param(form_pb2.ACTION_CANCEL, {"action": "cancel"}, id="cancel"),
    ],
)
async def test_a_field_less_confirmation_form_completes_through_the_broker_and_host_with_the_users_action(
    stack: ProviderStack, action: form_pb2.Action.ValueType, expected: dict[str, Any]
) -> None:
    events = _call(stack, "fx:empty_form", {})
    awaiting = await _next(events, "awaiting_interaction")
    pending = await stack.interaction.GetInteraction(
        interaction_service_pb2.GetInteractionRequest(interaction_id=awaiting.interaction_id, session_id="s1")
    )
    assert pending.interaction.form.message == "Proceed?"
    assert list(pending.interaction.form.fields) == []

    await stack.interaction.Answer(
        interaction_service_pb2.AnswerRequest(
            interaction_id=awaiting.interaction_id,
            session_id="s1",
            submission_id="sub-1",
            answer=form_pb2.Answer(action=action),
        )
    )
    result = await _next(events, "result")

    seen = json.loads(json.loads(result.call_tool_result_json)["content"][0]["text"])
    assert seen["responses"] == {"confirm": expected}
    first, retry = stack.wire.tool_calls("empty_form")
    assert "inputResponses" not in first["params"]
    assert retry["params"]["inputResponses"] == {"confirm": expected}
    assert retry["params"]["requestState"] == "empty"


async def test_registration_replacement_loses_the_call_and_a_late_answer_sends_no_retry(stack: ProviderStack) -> None:
    assert stack.provider.provider is not None
    link = stack.provider.provider.links["fx"]
    registrations = link.registrations
    events = _call(stack, "fx:ask", {})
    awaiting = await _next(events, "awaiting_interaction")

    outbox: asyncio.Queue[broker_pb2.ConnectRequest | None] = asyncio.Queue()
    await outbox.put(broker_pb2.ConnectRequest(register=broker_pb2.Register(provider_id="mcp:fx")))

    async def frames() -> AsyncIterator[broker_pb2.ConnectRequest]:
        while (frame := await outbox.get()) is not None:
            yield frame

    impostor = stack.broker.Connect(frames())
    try:
        async with asyncio.timeout(10):
            first = await impostor.read()
        assert isinstance(first, broker_pb2.ConnectResponse)
        assert first.WhichOneof("frame") == "registered"
        await _next(events, "lost")

        answer = form_pb2.Answer(action=form_pb2.ACTION_ACCEPT)
        answer.values["name"].string_value = "Late"
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stack.interaction.Answer(
                interaction_service_pb2.AnswerRequest(
                    interaction_id=awaiting.interaction_id, session_id="s1", submission_id="late", answer=answer
                )
            )
        await eventually(lambda: link.registrations > registrations and link.registered, what="provider re-registered")

        assert [c for c in stack.wire.tool_calls("ask") if "inputResponses" in c["params"]] == []
    finally:
        await outbox.put(None)
        impostor.cancel()


async def test_a_tool_list_change_reaches_the_broker_as_tools_changed(stack: ProviderStack) -> None:
    await _next(_call(stack, "hi:mutate", {"description": "redefined"}), "result")

    async def redefined() -> bool:
        tools = await _tools(stack)
        return "hi:ask" in tools and tools["hi:ask"].description == "redefined"

    await eventually(redefined, what="ToolsChanged applied by the broker")
