"""A provider's shutdown delivers every frame it sent: the real broker (its own process, so a test can
freeze it with SIGSTOP), the real Interaction service (in-process, real redis-server), a real SDK MCP server
over Streamable HTTP (a process too), and the provider's own SIGTERM path (:meth:`ProviderApp.stop`: drain,
then close) — in both orders of a Host pod's shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
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
from services.core.healthcheck import serving
from services.core.serving import start_server
from services.interaction import main as interaction_main
from services.interaction.settings import Settings as InteractionSettings
from services.mcp_provider import main as provider_main
from services.mcp_provider.main import ProviderApp
from services.mcp_provider.settings import Settings as ProviderSettings
from stack.ports import free_port
from tests.helpers.mcp_servers import ROOT, _http_server
from tests.helpers.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PYTHON = sys.executable

ROUNDS = 3
"""Shutdowns in a row, each right behind its results: a provider that cancels its stream loses one."""
FROZEN_SECONDS = 1.0
"""How long the broker reads nothing while the provider shuts down."""


@dataclass
class Host:
    broker: asyncio.subprocess.Process
    mcp: asyncio.subprocess.Process
    broker_target: str
    broker_stub: broker_pb2_grpc.CapabilityBrokerServiceAsyncStub
    interaction: interaction_service_pb2_grpc.InteractionServiceAsyncStub
    config: Path

    def provider_settings(self) -> ProviderSettings:
        return ProviderSettings(
            listen="127.0.0.1:0",
            broker_target=self.broker_target,
            mcp_config=self.config,
            reconnect_initial_seconds=0.05,
            reconnect_max_seconds=0.5,
            drain_seconds=60,
            grace_seconds=30,
        )


@pytest.fixture
async def host(redis_url: str, tmp_path: Path) -> AsyncIterator[Host]:
    """The Interaction service in-process, the broker as its own process (so a test can freeze it), the
    fixture MCP server over HTTP; the provider is each test's own."""
    mcp, url = await _http_server("high", tmp_path)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"hi": {"url": url, "era": "modern"}}}))
    interaction_settings = InteractionSettings(listen="127.0.0.1:0", redis_url=redis_url, host_id="shutdown")
    interaction = await start_server(await interaction_main.build(interaction_settings), interaction_settings)
    broker_target = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "MAKA_LISTEN": broker_target,
        "MAKA_INTERACTION_TARGET": f"127.0.0.1:{interaction.port}",
        "MAKA_HOST_ID": "shutdown",
        "MAKA_DRAIN_SECONDS": "60",
    }
    broker = await asyncio.create_subprocess_exec(PYTHON, "-m", "services.broker.main", env=env, cwd=ROOT)
    channels: list[grpc.aio.Channel] = []
    try:

        async def broker_serving() -> bool:
            return await serving(broker_target, timeout=1.0)

        await eventually(broker_serving, what="broker serving", timeout=60)
        broker_channel = grpc.aio.insecure_channel(broker_target)
        interaction_channel = grpc.aio.insecure_channel(f"127.0.0.1:{interaction.port}")
        channels += [broker_channel, interaction_channel]
        yield Host(
            broker,
            mcp,
            broker_target,
            broker_pb2_grpc.CapabilityBrokerServiceStub(broker_channel),
            interaction_service_pb2_grpc.InteractionServiceStub(interaction_channel),
            config,
        )
    finally:
        for channel in channels:
            await channel.close()
        for process in (broker, mcp):
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                await process.wait()
        await interaction.stop()


NEW_CALLS = "maka.broker.v1.CapabilityBrokerService"  # its readiness: "takes new calls"


async def _start_provider(host: Host) -> ProviderApp:
    app = await provider_main.build(host.provider_settings())
    await app.start()
    provider = app.provider
    assert provider is not None
    await eventually(lambda: provider.links["hi"].registered, what="provider registered", timeout=30)
    return app


NOTE = "x" * 3_000_000
"""Echoed in each result: two results are more than the socket buffers to a broker that reads nothing take,
so what is left is still in the provider's gRPC writes when it shuts down (a cancelled call drops it)."""


def _call(host: Host, tool_use_id: str) -> Any:
    return host.broker_stub.CallTool(
        broker_pb2.CallToolRequest(
            session_id="s1",
            turn_id="t1",
            tool_use_id=tool_use_id,
            tool_name="hi:ask",
            arguments_json=json.dumps({"note": NOTE}),
        )
    )


async def _awaiting(events: Any) -> broker_pb2.AwaitingInteraction:
    async with asyncio.timeout(30):
        async for event in events:
            kind = event.WhichOneof("event")
            if kind == "awaiting_interaction":
                awaiting: broker_pb2.AwaitingInteraction = event.awaiting_interaction
                return awaiting
            assert kind in ("accepted", "progress", "status"), event
    raise AssertionError("the call ended before its form")


async def _outcome(events: Any) -> broker_pb2.CallToolResponse:
    async with asyncio.timeout(30):
        async for event in events:
            if event.WhichOneof("event") in ("result", "failure", "lost", "stopped"):
                assert isinstance(event, broker_pb2.CallToolResponse)
                return event
    raise AssertionError("the call stream ended without an outcome")


async def _answer(host: Host, interaction_id: str, name: str) -> None:
    answer = form_pb2.Answer(action=form_pb2.ACTION_ACCEPT)
    answer.values["name"].string_value = name
    await host.interaction.Answer(
        interaction_service_pb2.AnswerRequest(
            interaction_id=interaction_id, session_id="s1", submission_id=f"sub-{name}", answer=answer
        )
    )


def _answered_name(outcome: broker_pb2.CallToolResponse) -> str:
    seen = json.loads(json.loads(outcome.result.call_tool_result_json)["content"][0]["text"])
    name: str = seen["responses"]["profile"]["content"]["name"]
    return name


async def _stop_right_behind_two_results(host: Host, n: int) -> list[str]:
    """One provider, two calls on its stream; the provider gets SIGTERM as their results are queued while
    the broker reads nothing. Returns each call's outcome (``result:<answered name>`` or its kind)."""
    app = await _start_provider(host)
    assert app.provider is not None
    link = app.provider.links["hi"]
    calls = [_call(host, f"tu-{n}-{k}") for k in range(2)]
    forms = [await _awaiting(events) for events in calls]
    stopping: list[asyncio.Task[None]] = []
    report_calls = link.on_calls_changed

    def result_queued() -> None:
        if report_calls is not None:
            report_calls()
        if not link.live_calls and not stopping:  # SIGTERM right behind the last result (the drain ends)
            stopping.append(asyncio.ensure_future(app.stop()))

    link.on_calls_changed = result_queued
    # Both answers reach the provider while the MCP server is frozen; then the broker freezes (a loaded Host
    # reads nothing for a while) and the MCP server resumes: both results (~6 MB, more than the socket
    # buffers take) are queued with the broker not reading, and the provider shuts down.
    host.mcp.send_signal(signal.SIGSTOP)
    for k, form in enumerate(forms):
        await _answer(host, form.interaction_id, f"n{n}-{k}")
    stream = link._stream
    assert stream is not None
    await eventually(lambda: not stream.forms, what="both answers at the provider")
    host.broker.send_signal(signal.SIGSTOP)
    host.mcp.send_signal(signal.SIGCONT)
    await eventually(lambda: bool(stopping), what="both results queued")
    # Long enough for a shutdown that cancels its stream to be over (it needs no broker), shorter than the
    # provider's bounded wait for the broker to end the stream (grace_seconds).
    await asyncio.wait(stopping, timeout=FROZEN_SECONDS)
    host.broker.send_signal(signal.SIGCONT)
    outcomes: list[str] = []
    for events in calls:
        outcome = await _outcome(events)
        kind = outcome.WhichOneof("event")
        outcomes.append(f"result:{_answered_name(outcome)}" if kind == "result" else str(kind))
    await asyncio.wait_for(stopping[0], 30)
    return outcomes


async def test_a_provider_stopped_right_behind_its_last_results_delivers_them_to_a_broker_slow_to_read(
    host: Host,
) -> None:
    outcomes = [outcome for n in range(ROUNDS) for outcome in await _stop_right_behind_two_results(host, n)]

    assert outcomes == [f"result:n{n}-{k}" for n in range(ROUNDS) for k in range(2)]


async def test_a_broker_that_drains_first_delivers_the_result_and_the_provider_then_stops(host: Host) -> None:
    app = await _start_provider(host)
    assert app.provider is not None
    link = app.provider.links["hi"]
    events = _call(host, "tu-broker-first")
    awaiting = await _awaiting(events)
    host.broker.send_signal(signal.SIGTERM)  # NOT_SERVING, drain until the call settles, then exit

    async def not_serving() -> bool:
        return not await serving(host.broker_target, NEW_CALLS, timeout=1.0)

    await eventually(not_serving, what="broker draining", timeout=30)
    await _answer(host, awaiting.interaction_id, "first")
    outcome = await _outcome(events)
    assert await asyncio.wait_for(host.broker.wait(), 60) == 0
    await eventually(lambda: not link.registered, what="the broker ended the provider stream")
    # The provider's own drain finds nothing in flight, and its close has no stream left to wait for.
    await asyncio.wait_for(app.stop(), 30)

    assert outcome.WhichOneof("event") == "result", outcome
    assert _answered_name(outcome) == "first"
